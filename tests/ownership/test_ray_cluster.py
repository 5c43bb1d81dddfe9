"""The Ray executor on a cluster started as users start one: `ray start --head` and `ray start --address`
(two nodes of one CPU, here on one machine, each with its own temp dir, sharing no work folder with the
driver), and `investigate --executor ray --ray-address`. The findings are the in-process run's, the tasks
ran on both nodes, and a driver whose code differs from the workers' is refused."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ownership.test_nodework import assert_same

pytestmark = pytest.mark.slow
pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env() -> dict[str, str]:
    """This checkout's code on the workers; the test cluster's own auth token, whatever ~/.ray holds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = CLUSTER_TOKEN
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


CLUSTER_TOKEN = secrets.token_hex(16)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head and one more node, each `ray start` in its own session: their daemons stay in its process
    group, which is what the teardown stops (`ray stop` would stop every Ray on the machine). Their temp
    dirs are short paths of their own: Ray's socket paths under them must stay within AF_UNIX's 107
    bytes, which pytest's temp folders (under xdist) exceed."""
    root = Path(tempfile.mkdtemp(prefix="kvr-", dir="/tmp"))
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus", "1", "--disable-usage-stats", "--dashboard-agent-listen-port"]
    commands = [
        [str(RAY), "start", "--head", "--port", str(port), "--include-dashboard=false"]
        + ["--dashboard-port", str(free_port()), "--temp-dir", str(root / "h"), *common, str(free_port())],
        [str(RAY), "start", "--address", address, "--temp-dir", str(root / "w"), *common, str(free_port())],
    ]
    started: list[subprocess.Popen] = []
    try:
        for i, command in enumerate(commands):
            log = (root / f"start{i}.log").open("w")
            proc = subprocess.Popen(
                command, env=cluster_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            started.append(proc)
            if proc.wait(timeout=120) != 0:
                pytest.fail(f"{' '.join(command)} failed:\n{(root / f'start{i}.log').read_text()[-3000:]}")
        yield address
    finally:
        for proc in started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def bundle(incident_bundle: Path) -> Path:
    return incident_bundle  # the session's incident (tests/conftest.py): seed 5, 900 requests


def cli(args: list[str], patch: str = "") -> subprocess.CompletedProcess:
    """`forensics ARGS` as a separate driver process joining the test cluster; `patch` runs first."""
    code = f"import sys\n{patch}\nfrom forensics.cli import main\nsys.argv = ['forensics', *{args!r}]\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code], env=cluster_env(), capture_output=True, text=True, timeout=600, check=False
    )


def test_two_node_cluster_matches_the_in_process_run(
    cluster: str, bundle: Path, incident_serial: tuple[Path, dict], tmp_path: Path
) -> None:
    serial = incident_serial[0]  # the bundle investigated in this process, one worker (tests/conftest.py)
    out = tmp_path / "ray"
    args = ["investigate", str(bundle), "--out", str(out), "--quiet"]
    done = cli([*args, "--executor", "ray", "--ray-address", cluster, "--workers", "2"])
    assert done.returncode == 0, done.stderr
    assert_same(serial, out)
    execution = json.loads((out / "manifest.json").read_text())["execution"]
    assert execution["tasks_run"] == execution["nodes"] >= 4
    assert execution["ray_nodes"] == 2
    assert "ray_nodes" not in json.loads((serial / "manifest.json").read_text())["execution"]


def test_a_worker_running_other_code_fails_the_run(cluster: str, bundle: Path, tmp_path: Path) -> None:
    # the driver's digest is changed; the workers import this checkout's modules and compute the real one
    patch = "import forensics.ownership.execution.nodes as nodes\nnodes.code_digest = lambda: '0' * 64"
    out = tmp_path / "out"
    args = ["investigate", str(bundle), "--out", str(out), "--quiet", "--executor", "ray", "--ray-address", cluster]
    done = cli(args, patch)
    assert done.returncode == 2, done.stderr
    assert "runs other kv-forensics code than this process" in done.stderr
    assert "Ray node" in done.stderr and "given node" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()  # the run created it and removes it whole

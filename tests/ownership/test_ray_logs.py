"""The logs-only path on a Ray cluster of two nodes (`investigate --executor ray --ray-address`): each
node's engine logs are read by Ray tasks by node and time range (forensics/ownership/execution/engine_logs.py) and
the allocator model's replays run as Ray tasks (walks.py); every file the run writes but its manifest is
the one-process run's, byte for byte, on a `simulate --scale` bundle of several nodes and days, rotated
and gzipped files among them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forensics.ownership import Execution
from forensics.pipeline import investigate
from tests.ownership.test_ray_cluster import cli, cluster  # noqa: F401 (cluster: the two-node fixture)

pytestmark = pytest.mark.slow
pytest.importorskip("ray")

AS_OF = "2026-09-10T12:00:00Z"
COMPARED = (".csv", ".md", ".html", ".txt", ".json")


@pytest.fixture(scope="module")
def logs_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scale") / "sim"
    args = ["simulate", str(out), "--scale", "--requests", "1500", "--seed", "7", "--days", "2"]
    done = cli([*args, "--decode-nodes", "3", "--prefill-nodes", "2", "--rotation", "numbered-gz"])
    assert done.returncode == 0, done.stderr
    return out / "bundle"


def written(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.suffix in COMPARED and p.name != "manifest.json"
    }


def test_logs_only_on_two_ray_nodes_matches_one_process(
    cluster: str,  # noqa: F811 (the fixture)
    logs_only: Path,
    tmp_path: Path,
) -> None:
    engine = sorted({p.parent.name for p in (logs_only / "engine").glob("*/*")})
    assert len(engine) == 5 and any((logs_only / "engine").glob("*/*.gz"))
    assert not any(logs_only.glob("pages/*"))  # logs only: no page events
    serial = tmp_path / "serial"
    investigate(logs_only, serial, as_of=AS_OF, execution=Execution(workers=1))
    out = tmp_path / "ray"
    args = ["investigate", str(logs_only), "--out", str(out), "--quiet", "--as-of", AS_OF]
    # the profile names each engine-log task; each file is a task of its own (a day of the log: time shards)
    profile = (
        "import os\nos.environ['KVF_PROFILE'] = '1'\n"
        "import forensics.ownership.execution.engine_logs as e\ne.SHARD_BYTES = 1"
    )
    done = cli([*args, "--executor", "ray", "--ray-address", cluster, "--workers", "2"], profile)
    assert done.returncode == 0, done.stderr
    a, b = written(serial), written(out)
    assert sorted(a) == sorted(b)
    assert "affected_responses.csv" in a and len(a) > 20
    for name in a:
        assert a[name] == b[name], name
    tasks = re.findall(r"engine-log task (\S+) on \S+ \(Ray node (\w+)\)", done.stderr)
    assert sorted({n for n, _ in tasks}) == engine  # every node's files ...
    assert len(tasks) > len(engine)  # ... in time shards: some node's files in several tasks
    assert len({r for _, r in tasks}) == 2  # on both nodes of the cluster

"""Every way `forensics investigate` stops short leaves no database and no work folder: a signal
(SIGTERM, SIGINT) in the middle of the run (which builds in OUT.kvf-staging-<pid> beside --out), and
inputs that stop it before it starts (which must not leave behind an empty --out folder the run
created). tests/whole/test_atomic_outputs.py: a stopped rerun leaves a finished --out as it was."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("interrupt")
    simulate(tmp / "sim", build_config("default", seed=21, requests=120))
    return tmp / "sim" / "bundle"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "forensics", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def wait_for_any(paths: list[Path], proc: subprocess.Popen[str], timeout: float = 120) -> Path:
    """The first of `paths` to appear while the run is still going (the run has started its work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in paths:
            if p.exists():
                return p
        assert proc.poll() is None, f"the run ended before its work began: {proc.communicate()}"
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"none of {paths} appeared in {timeout}s")


def leftovers(out: Path) -> list[str]:
    names = ("incident.duckdb", "incident.duckdb.wal", "incident.duckdb.tmp", ".kvf-work")
    return [n for n in names if (out / n).exists()] + [p.name for p in out.parent.iterdir() if ".kvf-" in p.name]


def staging(out: Path, proc: subprocess.Popen[str]) -> Path:
    """Where the run builds its outputs (forensics.outputs.scratch_path)."""
    return out.with_name(f"{out.name}.kvf-staging-{proc.pid}")


def test_sigterm_mid_run_leaves_the_out_folder_as_it_was(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "case"
    out.mkdir()  # the folder is the user's: it stays as it was, empty
    # two workers: the per-node tasks write under the staging folder's .kvf-work, which a signal must not leave
    proc = start("investigate", str(bundle), "--out", str(out), "--workers", "2", "--quiet")
    wait_for_any([staging(out, proc) / ".kvf-work"], proc)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: interrupted by SIGTERM"), stderr
    assert "Traceback" not in stderr
    assert out.is_dir() and not any(out.iterdir())
    assert leftovers(out) == []
    time.sleep(1)  # the workers were stopped, not left to write into the removed work folder
    assert leftovers(out) == []


def test_sigint_removes_the_out_folder_the_run_created(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "case"
    proc = start("investigate", str(bundle), "--out", str(out), "--quiet")
    wait_for_any([staging(out, proc) / "incident.duckdb", staging(out, proc) / ".kvf-work"], proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert stderr.strip().splitlines() == [f"Error: interrupted by SIGINT: {out} not created"]
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ("missing", "no such bundle folder"),
        ("bundle.toml", "bundle.toml: unknown section [nonsense]"),
        ("exclusions.toml", "exclusions.toml: unknown top-level key 'nonsense'"),
        ("--exclusions", "no-such-exclusions.toml"),
    ],
)
def test_unusable_inputs_leave_no_out_folder(bundle: Path, tmp_path: Path, broken: str, says: str) -> None:
    copy = tmp_path / "bundle"
    args: list[str] = []
    if broken == "missing":
        copy = tmp_path / "no-such-bundle"
    else:
        shutil.copytree(bundle, copy)
        if broken == "--exclusions":
            args = ["--exclusions", str(tmp_path / "no-such-exclusions.toml")]
        else:
            (copy / broken).write_text("[nonsense]\nx = 1\n")
    out = tmp_path / "new" / "case"
    proc = subprocess.run(
        [sys.executable, "-m", "forensics", "investigate", str(copy), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()

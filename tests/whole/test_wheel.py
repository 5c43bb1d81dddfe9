"""The package works installed from its wheel, outside the checkout: queries and templates ship inside it.

The wheel is built from this checkout and installed into a fresh virtual environment whose only other
path is the project venv's site-packages, for the dependencies (its .pth files, among them the
editable install of this checkout, are not processed there). The commands then run from a folder
outside the checkout.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests import support

ROOT = support.ROOT
EXAMPLE = ROOT / "tests" / "data" / "example"  # the contract's worked example
AUDIT = ROOT / "tests" / "data" / "audit"


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kw)


@pytest.mark.slow
def test_the_wheel_installs_and_investigates_outside_the_checkout(tmp_path: Path) -> None:
    src = tmp_path / "src"  # built from a copy: the build leaves build/ and *.egg-info beside its sources
    shutil.copytree(ROOT / "forensics", src / "forensics", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", src])
    if built.returncode and "Could not find a version" in built.stderr + built.stdout:
        pytest.skip("no package index for the build backend: " + built.stderr[-200:])
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("kv_forensics-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "forensics/ingest/queries/schema/01_files.sql" in names  # a step folder ships too
    assert "forensics/report/templates/report.html.j2" in names

    venv = tmp_path / "fresh"
    assert _run([sys.executable, "-m", "venv", venv]).returncode == 0
    py = venv / "bin" / "python"
    site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel])
    assert installed.returncode == 0, installed.stderr

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = _run([py, "-c", "import forensics; print(forensics.__file__)"], cwd=work, env=env)
    assert where.stdout.strip().startswith(site), where.stdout + where.stderr  # the wheel, not the checkout

    cli = venv / "bin" / "forensics"
    out = _run([cli, "investigate", EXAMPLE / "bundle", "--out", work / "out"], cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    assert (work / "out" / "report.html").stat().st_size > 10_000
    for name in ("affected_responses.csv", "exposures.csv"):  # the contract's worked example, as expected
        with (EXAMPLE / "expected" / name).open() as fh:
            want = list(csv.DictReader(fh))
        with (work / "out" / name).open() as fh:
            got = list(csv.DictReader(fh))
        cols = list(want[0])
        assert sorted(tuple(r[c] for c in cols) for r in got) == sorted(tuple(r[c] for c in cols) for r in want)

    logs = sorted(p for p in AUDIT.rglob("*.log"))[:3]
    audit = _run([cli, "audit-config", *logs, "--json"], cwd=work, env=env)
    assert audit.returncode in (0, 1), audit.stderr  # 1: a pool too small for the context, by design
    assert audit.stdout.lstrip().startswith(("[", "{"))

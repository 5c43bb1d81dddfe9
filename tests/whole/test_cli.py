"""Issue #24, the CLI for a long night: options checked before any work, --version, --json, a progress
display only on a terminal, an --out that is not ours refused, no half-written database after a
failure, a manifest with the chain of custody, and a database that opens from any folder."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import forensics
from forensics import progress
from forensics.errors import InputError
from forensics.pipeline import Custody, investigate
from forensics.simulate import build_config, simulate

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # the terminal's colour and cursor codes


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forensics", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    simulate(tmp / "sim", build_config("default", seed=21, requests=120))
    return tmp / "sim" / "bundle"


@pytest.fixture(scope="module")
def relative_run(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One run from the CLI with relative paths (the bundle copied beside the working folder), --json."""
    work = tmp_path_factory.mktemp("rel")
    shutil.copytree(bundle, work / "evidence")
    proc = cli("investigate", "evidence", "--out", "case", "--json", "--operator", "a.analyst", cwd=work)
    assert proc.returncode == 0, proc.stderr
    return {"proc": proc, "out": work / "case", "work": work}


def test_version() -> None:
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"kv-forensics {forensics.__version__} (DuckDB {duckdb.__version__})"


@pytest.mark.parametrize(
    "args,says",
    [
        (["--memory-limit", "lots"], "--memory-limit: 'lots' is not a memory size"),
        (["--memory-limit", "-2GB"], "--memory-limit: '-2GB' is not a memory size"),
        (["--as-of", "yesterday"], "--as-of: 'yesterday' is not an RFC 3339 timestamp"),
        (["--as-of", "2026-09-10T09:00:00"], "has no time zone"),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--since", "2026-09-10", "--until", "2026-09-01"], "is not before --until"),
    ],
)
def test_bad_options_stop_before_any_work(bundle: Path, tmp_path: Path, args: list[str], says: str) -> None:
    out = tmp_path / "never"
    proc = cli("investigate", str(bundle), "--out", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()  # refused before the output folder was made, let alone the analysis run


def test_json_summary_matches_the_findings(relative_run: dict) -> None:
    proc, out = relative_run["proc"], relative_run["out"]
    summary = json.loads(proc.stdout)
    assert Path(summary["out"]) == Path("case")
    rows = sum(1 for _ in (out / "affected_responses.csv").open()) - 1
    assert summary["rows"]["affected_responses.csv"] == rows
    assert summary["headline"]["affected"] == rows
    # the customer cohort, confirmed and indeterminate apart (#47): "may have been" is not "was"
    with (out / "affected_responses.csv").open() as fh:
        customer = {r["request_id"]: r["status"] for r in csv.DictReader(fh) if r["cohort"] == "customer"}
    h = summary["headline"]
    assert h["customer_confirmed"] == sum(s == "confirmed" for s in customer.values())
    assert h["customer_indeterminate"] == sum(s == "indeterminate" for s in customer.values())
    assert h["customer"] == len(customer) == h["customer_confirmed"] + h["customer_indeterminate"]
    assert isinstance(summary["cohort_warnings"], list)
    assert "done ingest" not in proc.stderr  # not a terminal: no progress display


def test_the_database_opens_from_another_folder(relative_run: dict, tmp_path: Path) -> None:
    out, work = relative_run["out"], relative_run["work"]
    probe = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
        "print(c.execute('SELECT count(*) FROM page_events').fetchone()[0], "
        "c.execute('SELECT count(*) FROM gateway').fetchone()[0])"
    )
    elsewhere = subprocess.run(
        [sys.executable, "-c", probe, str(out / "incident.duckdb")], capture_output=True, text=True, cwd=tmp_path
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    events, gateway = map(int, elsewhere.stdout.split())
    manifest = json.loads((out / "manifest.json").read_text())
    assert events == sum(f["rows_loaded"] for f in manifest["inputs"] if f["source"] == "pages") > 0
    assert gateway == sum(f["rows_loaded"] for f in manifest["inputs"] if f["source"] == "gateway") > 0
    assert work.exists()


def test_manifest_records_the_chain_of_custody(relative_run: dict) -> None:
    out = relative_run["out"]
    manifest = json.loads((out / "manifest.json").read_text())
    run = manifest["run"]
    assert run["command"].startswith("forensics investigate evidence --out case")
    assert run["operator"] == "a.analyst"
    assert run["started_at"] <= run["finished_at"]
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(run["outputs_sha256"]) == written and "incident.duckdb" in written
    for name, digest in run["outputs_sha256"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    assert manifest["incident"] == {
        "id": "INC-SIM-0001",
        "report": {"version": 1, "phase": "initial", "supersedes": None},
    }


def test_operator_comes_from_the_environment(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVF_OPERATOR", "night.shift")
    assert Custody().operator == "night.shift"
    assert Custody(operator="named").operator == "named"


def test_an_out_folder_that_is_not_ours_is_refused(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("someone else's work\n")
    with pytest.raises(InputError, match=r"not this tool's outputs \(notes.txt\).*--force"):
        investigate(bundle, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    investigate(bundle, out, force=True)
    assert (out / "report.html").is_file() and (out / "notes.txt").read_text() == "someone else's work\n"


def test_another_incidents_outputs_are_refused(bundle: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-bundle"
    shutil.copytree(bundle, other)
    toml = other / "bundle.toml"
    toml.write_text(toml.read_text().replace('id = "INC-SIM-0001"', 'id = "INC-OTHER-7"'))
    out = tmp_path / "case"
    investigate(other, out)
    before = (out / "exposures.csv").read_bytes()
    with pytest.raises(InputError, match="holds the outputs of incident INC-OTHER-7"):
        investigate(bundle, out)
    assert (out / "exposures.csv").read_bytes() == before
    investigate(other, out)  # the same incident again: a rerun, allowed


def test_a_failed_run_leaves_no_database(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics.pipeline as pipeline

    def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("simulated failure while writing findings")

    monkeypatch.setattr(pipeline, "write_findings", boom)
    out = tmp_path / "failed"
    out.mkdir()  # the user's folder: it stays, without the unfinished database
    with pytest.raises(RuntimeError, match="simulated failure"):
        investigate(bundle, out)
    left = sorted(p.name for p in out.iterdir())
    assert not [n for n in left if n.startswith("incident.duckdb") or n == ".kvf-work"], left
    created = tmp_path / "made-by-the-run" / "out"
    with pytest.raises(RuntimeError, match="simulated failure"):
        investigate(bundle, created)
    assert not (tmp_path / "made-by-the-run").exists()  # the folders this run created go with it


def test_progress_shows_each_stage_only_when_asked(bundle: Path, tmp_path: Path, capsys) -> None:
    with progress.shown(force=True):
        investigate(bundle, tmp_path / "shown")
    err = ANSI.sub("", capsys.readouterr().err)
    for stage in ("ingest", "cohorts", "ownership", "findings", "write_findings", "report"):
        assert f"done {stage}" in err, stage
    assert "finished in" in err
    with progress.shown(quiet=True, force=True):
        investigate(bundle, tmp_path / "quiet")
    assert "done ingest" not in capsys.readouterr().err
    for name in ("exposures.csv", "affected_responses.csv", "report.md"):  # the display changes no finding
        assert (tmp_path / "shown" / name).read_bytes() == (tmp_path / "quiet" / name).read_bytes()


@pytest.mark.parametrize(
    "report,says",
    [
        ("version = 0", "[report] version 0 must be a whole number from 1"),
        ('phase = "draft"', "[report] phase 'draft' must be one of initial, supplementary, final"),
        ('colour = "red"', "unknown key 'colour' in [report]"),
    ],
)
def test_report_versions_are_checked(bundle: Path, tmp_path: Path, report: str, says: str) -> None:
    b = tmp_path / "b"
    shutil.copytree(bundle, b)
    (b / "bundle.toml").write_text((b / "bundle.toml").read_text() + f"\n[report]\n{report}\n")
    with pytest.raises(InputError) as err:
        investigate(b, tmp_path / "out")
    assert says in str(err.value)


def test_a_later_version_names_the_one_it_supersedes(bundle: Path, tmp_path: Path) -> None:
    b = tmp_path / "b"
    shutil.copytree(bundle, b)
    (b / "bundle.toml").write_text((b / "bundle.toml").read_text() + '\n[report]\nversion = 3\nphase = "final"\n')
    investigate(b, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Disclosure report, version 3, final filing (supersedes version 2)" in md
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["incident"]["report"] == {"version": 3, "phase": "final", "supersedes": "2"}


def test_parquet_export_of_the_findings_tables(bundle: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from forensics.pipeline import PARQUET_TABLES

    out = tmp_path / "pq"
    result = investigate(bundle, out, parquet=True)
    for table in PARQUET_TABLES:
        t = pq.read_table(out / "parquet" / f"{table}.parquet")
        csv_rows = sum(1 for _ in (out / f"{table}.csv").open()) - 1
        assert t.num_rows == csv_rows == result.counts[f"parquet/{table}.parquet"], table
    exposures = pq.read_table(out / "parquet" / "exposures.parquet")
    assert str(exposures.schema.field("first_exposed_at").type).startswith("timestamp")  # typed, not text
    assert exposures.schema.field("slots").type == "int64"
    hashed = json.loads((out / "manifest.json").read_text())["run"]["outputs_sha256"]
    assert {f"parquet/{t}.parquet" for t in PARQUET_TABLES} <= set(hashed)
    assert not (out / "incident.duckdb.tmp").exists()


@pytest.mark.parametrize("threads,workers", [(1, 2), (2, 2), (2, 1)])
def test_threads_reach_every_task(bundle: Path, tmp_path: Path, threads: int, workers: int) -> None:
    """--threads holds for the run's own DuckDB (ingest, findings, the allocator model's walks) and is
    shared among the per-node tasks' workers: each task's DuckDB (and so its compiled walks) gets
    threads // workers, at least one (--json says). The options in this process (CliRunner): the worker
    processes are spawned all the same; the tests above run the command in a process of its own."""
    from typer.testing import CliRunner

    from forensics.cli import app

    res = CliRunner().invoke(app, [
        "investigate", str(bundle), "--out", str(tmp_path / "o"), "--json", "--quiet",
        "--threads", str(threads), "--workers", str(workers),
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["threads"] == threads
    tasks = got["per_node_tasks"]
    if workers == 1:  # every node on the run's own connection: its threads are the run's
        assert tasks is None
        return
    assert tasks["tasks_run"] >= 2 and tasks["workers"] == workers
    assert tasks["task_threads"] == [max(1, threads // workers)]

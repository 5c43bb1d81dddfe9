"""The main job: ingest -> cohorts -> ownership -> findings -> report, into one output folder."""

from __future__ import annotations

import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb

import forensics
from forensics.bundle import Window, sha256_file
from forensics.cohorts import assign_cohorts, load_exclusions
from forensics.db import connect, one, timed
from forensics.findings import compute_findings, write_findings
from forensics.ingest import copy_in_place, in_place_note, ingest_into, node_summary
from forensics.nodework import Execution
from forensics.outputs import make_private, private_files, write_json
from forensics.ownership import rebuild_ownership


@dataclass
class InvestigationResult:
    out: Path
    counts: dict[str, int]
    headline: dict[str, int]
    tasks: dict[str, int] | None = None  # per-node tasks run and reused, when they ran apart
    self_contained: bool = False

    def summary(self) -> str:
        h = self.headline
        lines = [
            f"Affected responses: {h['affected']} ({h['confirmed']} confirmed, "
            f"{h['indeterminate']} indeterminate); "
            f"customer cohort: {h['customer']}",
            f"Exposure pairs: {h['pairs']}; hazards: {self.counts.get('hazards.csv', 0)}; "
            f"rejected input rows: {self.counts.get('rejected.csv', 0)}",
        ]
        if self.tasks:
            lines.append(f"Per-node tasks: {self.tasks['tasks_run']} run, {self.tasks['reused']} reused from the cache")
        lines += [f"Findings written to {self.out}/", f"Report: {self.out / 'report.html'}"]
        return "\n".join([*lines, in_place_note(self.self_contained)])


def _headline(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    row = one(
        con,
        """SELECT count(DISTINCT request_id), count(DISTINCT request_id) FILTER (WHERE status = 'confirmed'),
        count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate'),
        count(DISTINCT request_id) FILTER (WHERE cohort = 'customer'),
        (SELECT count(*) FROM exposures) FROM affected_responses""",  # a request id in two records: once
    )
    return dict(zip(("affected", "confirmed", "indeterminate", "customer", "pairs"), row, strict=True))


def analyze(
    con: duckdb.DuckDBPyConnection,
    bundle: Path,
    exclusions: Path | None = None,
    execution: Execution | None = None,
    window: Window | None = None,
):
    """Ingest, label cohorts, rebuild ownership and compute findings into `con` (no files written)."""
    with timed("ingest"):
        files, config = ingest_into(con, bundle, window)
    excl = exclusions or (bundle / "exclusions.toml")
    # a file named by --exclusions must exist; the bundle's own is optional
    rules = load_exclusions(excl) if exclusions is not None or excl.is_file() else []
    with timed("cohorts"):
        assign_cohorts(con, rules)
    with timed("ownership"):
        rebuild_ownership(con, execution)
    with timed("findings"):
        compute_findings(con)
    return files, config, rules, excl


def investigate(
    bundle: Path,
    out: Path,
    exclusions: Path | None = None,
    as_of: str | None = None,
    memory_limit: str | None = None,
    threads: int | None = None,
    execution: Execution | None = None,
    window: Window | None = None,
    self_contained: bool = False,
) -> InvestigationResult:
    execution = execution or Execution(workers=0)
    execution.memory_limit = execution.memory_limit or memory_limit
    with private_files():
        result = _investigate(
            bundle, out, exclusions, as_of, memory_limit, threads, execution, window or Window(), self_contained
        )
    result.self_contained = self_contained
    return result


def _investigate(
    bundle: Path,
    out: Path,
    exclusions: Path | None,
    as_of: str | None,
    memory_limit: str | None,
    threads: int | None,
    execution: Execution,
    window: Window,
    self_contained: bool,
) -> InvestigationResult:
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "incident.duckdb"
    for stale in (db_path, Path(str(db_path) + ".wal")):
        stale.unlink(missing_ok=True)
    con = connect(db_path, memory_limit=memory_limit, threads=threads)
    try:
        work = out / ".kvf-work"  # per-node task files: scratch, removed after the analysis
        shutil.rmtree(work, ignore_errors=True)
        execution.workdir = work
        try:
            files, config, rules, excl = analyze(con, bundle, exclusions, execution, window)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        with timed("write_findings"):
            counts = write_findings(con, out)
        headline = _headline(con)
        from forensics.report import render_report

        with timed("report"):
            render_report(con, out, config=config, files=files, rules=rules, as_of=as_of)
        manifest = {
            "inputs": [f.manifest_entry() for f in files],
            "exclusions": {
                "path": str(excl.name) if excl.is_file() else None,
                "sha256": sha256_file(excl)[0] if excl.is_file() else None,
            },
            "tool": {
                "name": "kv-forensics",
                "version": forensics.__version__,
                "duckdb": duckdb.__version__,
                "python": platform.python_version(),
            },
            "nodes": [
                dict(zip(("node", "role", "pool_tokens", "page_size", "context_len", "page_events"), n, strict=True))
                for n in node_summary(con)
            ],
            "outputs": counts,
            "window": window.describe() if window.active else None,
            "self_contained": self_contained,  # False: incident.duckdb reads the bundle's Parquet files in place
            "execution": {k: v for k, v in execution.stats.items() if k != "tasks"} or None,
        }
        write_json(manifest, out / "manifest.json")
        if self_contained:
            with timed("copy_in_place"):
                copy_in_place(con)
    finally:
        con.close()
    shutil.rmtree(Path(str(db_path) + ".tmp"), ignore_errors=True)
    make_private(db_path)
    tasks = {k: execution.stats[k] for k in ("tasks_run", "reused")} if "tasks_run" in execution.stats else None
    return InvestigationResult(out, counts, headline, tasks)

"""The jobs, stage by stage: investigate (intake -> ingest -> cohorts -> ownership -> findings ->
report, into one output folder), ingest_bundle (ingest and cohorts only, into one database) and
preview_cohorts (the gateway log and the exclusion rules only)."""

from __future__ import annotations

import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import forensics
from forensics.cohorts import assign_cohorts, exclusion_rules
from forensics.cohorts.preview import preview
from forensics.db import connect, timed
from forensics.findings import compute_findings, write_findings
from forensics.findings import headline as findings_headline
from forensics.ingest import copy_in_place, in_place_note, ingest_gateway, ingest_into, node_summary
from forensics.intake import BundleConfig, InputFile, Window, sha256_file
from forensics.outputs import make_private, private_files, write_json
from forensics.ownership import Execution, rebuild_ownership


@dataclass
class IngestResult:
    db: Path
    files: list[InputFile]
    config: BundleConfig
    counts: dict[str, int] = field(default_factory=dict)
    nodes: list[tuple] = field(default_factory=list)
    self_contained: bool = False

    def summary(self) -> str:
        lines = [f"Ingested into {self.db}"]
        for src in ("gateway", "engine_log", "engine_requests", "pages"):
            fs = [f for f in self.files if f.source == src]
            if fs:
                lines.append(
                    f"  {src:16} {len(fs):3} file(s)  read {sum(f.rows_read for f in fs):>10,}  "
                    f"loaded {sum(f.rows_loaded for f in fs):>10,}  "
                    f"rejected {sum(f.rows_rejected for f in fs):>8,}"
                )
        for f in self.files:
            if f.error:
                lines.append(f"  UNREADABLE {f.rel}: {f.error}")
        if self.nodes:
            lines.append("  nodes: node, role, pool tokens, page size, context length, page events")
            for n in self.nodes:
                lines.append("    " + ", ".join("-" if v is None else str(v) for v in n))
        lines.append(in_place_note(self.self_contained))
        return "\n".join(lines)


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
    excl, rules = exclusion_rules(bundle, exclusions)
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
        headline = findings_headline(con)
        from forensics.report import render_report

        with timed("report"):
            render_report(con, out, config=config, files=files, rules=rules, as_of=as_of)
        manifest = {
            "inputs": [f.manifest_entry() for f in files],
            "exclusions": {
                "path": str(excl.name) if excl else None,
                "sha256": sha256_file(excl)[0] if excl else None,
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


def ingest_bundle(bundle: Path, db: Path, exclusions: Path | None = None, self_contained: bool = False) -> IngestResult:
    with private_files():  # the database and manifest hold customer identifiers
        result = _ingest_bundle(bundle, db, exclusions, self_contained)
    make_private(db)
    return result


def _ingest_bundle(bundle: Path, db: Path, exclusions: Path | None, self_contained: bool) -> IngestResult:
    db.parent.mkdir(parents=True, exist_ok=True)
    if db.exists():
        db.unlink()
    con = connect(db)
    try:
        files, config = ingest_into(con, bundle)
        result = IngestResult(db, files, config, nodes=node_summary(con))
        excl, rules = exclusion_rules(bundle, exclusions)
        if excl:
            assign_cohorts(con, rules)
        if self_contained:
            copy_in_place(con)
        result.self_contained = self_contained
    finally:
        con.close()
    manifest = db.parent / "manifest.json"
    write_json({"inputs": [f.manifest_entry() for f in files]}, manifest)
    return result


def preview_cohorts(bundle: Path, exclusions: Path | None = None) -> dict[str, Any]:
    """The gateway log and the exclusion rules only: counts per cohort and per rule, before and after
    exclusion (forensics.cohorts.preview); plain data."""
    excl, rules = exclusion_rules(bundle, exclusions)
    con = connect(":memory:")
    try:
        gateway = ingest_gateway(con, bundle)
        counts = preview(con, rules)
    finally:
        con.close()
    total = sum(c["requests"] for c in counts["cohorts"])
    customer = sum(c["requests"] for c in counts["cohorts"] if c["cohort"] == "customer")
    return {
        "bundle": str(bundle),
        "exclusions": str(excl) if excl else None,
        "requests_before": total,
        "requests_after": customer,
        "cohorts": counts["cohorts"],
        "rules": counts["rules"],
        "rows_rejected": sum(f.rows_rejected for f in gateway),
    }

"""The jobs, stage by stage: investigate (intake -> ingest -> cohorts -> ownership -> findings ->
report, into one output folder), ingest_bundle (ingest and cohorts only, into one database) and
preview_cohorts (the gateway log and the exclusion rules only)."""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

import forensics
from forensics import custody as custody_mod
from forensics.catalog import publish
from forensics.cohorts import assign_cohorts, exclusion_rules
from forensics.cohorts.preview import preview, store_warnings
from forensics.db import connect, thread_count, timed
from forensics.findings import compute_findings, possible_pairs_plan, write_findings
from forensics.findings import headline as findings_headline
from forensics.findings import source_tier as findings_source_tier
from forensics.findings import tier_reliability as findings_tier_reliability
from forensics.findings.damage import damage_rows
from forensics.ingest import copy_in_place, ingest_gateway, ingest_into, node_summary
from forensics.ingest.gateway import gateway_join_summary
from forensics.intake import InputFile, Window, sha256_file
from forensics.outputs import (
    carry_over,
    check_swappable,
    keep_mode,
    make_private,
    private_files,
    recover,
    scratch_path,
    swap_in,
    write_json,
)
from forensics.ownership import Execution, NodeRun, engine_loader, on_cluster, rebuild_ownership
from forensics.pipeline.out import OUT_NAMES as OUT_NAMES
from forensics.pipeline.out import PARQUET_TABLES as PARQUET_TABLES
from forensics.pipeline.out import Custody as Custody
from forensics.pipeline.out import check_out, export_parquet, first_missing, record_custody
from forensics.pipeline.results import IngestResult as IngestResult
from forensics.pipeline.results import InvestigationResult as InvestigationResult
from forensics.report.notices import check_notice_templates
from forensics.run import Run, load_run


def analyze(con: duckdb.DuckDBPyConnection, run: Run) -> tuple[list[InputFile], NodeRun]:
    """Ingest, label cohorts, rebuild ownership and compute findings into `con` (no files written).
    Returns the input files and what the per-node ownership work ran."""
    with on_cluster(run.execution):  # --executor ray: every stage's tasks on one connection to the cluster
        with timed("ingest"):
            files, _ = ingest_into(con, run.bundle, run.window, run.config, engine_loader(run.execution))
        with timed("cohorts"):
            assign_cohorts(con, list(run.rules))
            store_warnings(con, list(run.rules))  # the report and the summary name a client-settable rule's effect
        with timed("ownership"):
            ran = rebuild_ownership(con, run.execution)
        with timed("findings"):
            compute_findings(con)
    return files, ran


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
    force: bool = False,
    custody: Custody | None = None,
    parquet: bool = False,
    possible_pairs: bool | None = None,
    notice_templates: list[Path] | None = None,
) -> InvestigationResult:
    """The run builds its outputs in a folder beside --out (OUT.kvf-staging-<pid>) and swaps it in
    only when everything is written, the manifest's custody included: a run that fails or is stopped
    leaves --out as it was, byte for byte (a new --out is not created)."""
    run = load_run(
        bundle,
        exclusions,
        window=window,
        as_of=as_of,
        execution=execution or Execution(workers=0),
        memory_limit=memory_limit,
        threads=threads,
    )
    check_notice_templates(notice_templates)
    custody = custody or Custody()
    key = custody_mod.signing_key(custody.sign_key)  # a bad key stops the run before the analysis
    # a symlinked --out stays a link: the folder it points to is the one replaced
    target = out.resolve() if out.is_symlink() else out
    recovered = recover(target)  # before check_out: it judges the folder an earlier swap left in place
    check_out(target, run.config, force)
    check_swappable(target)
    started = datetime.now(UTC)
    created = first_missing(target.parent)
    staging = scratch_path(target, "staging")
    try:
        with private_files():
            staging.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
            result = _investigate(run, staging, self_contained, possible_pairs, notice_templates)
            if parquet:
                result.counts.update(export_parquet(staging))
            if force:
                carry_over(target, staging, ours=lambda name: name in OUT_NAMES)
        keep_mode(target, staging)
        record_custody(staging, custody, started, bundle, run.exclusions, previous=target)
        if key is not None:
            custody_mod.sign(staging, key)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created is not None:  # folders this run made to hold the staging folder hold nothing else
            shutil.rmtree(created, ignore_errors=True)
        raise
    swap_in(staging, target)
    result.out = out
    result.self_contained = self_contained
    result.recovered = recovered
    return result


def _investigate(
    run: Run,
    out: Path,
    self_contained: bool,
    possible_pairs: bool | None = None,
    notice_templates: list[Path] | None = None,
) -> InvestigationResult:
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "incident.duckdb"
    for stale in (db_path, Path(str(db_path) + ".wal")):
        stale.unlink(missing_ok=True)
    con = connect(db_path, memory_limit=run.memory_limit, threads=run.threads)
    run_threads = thread_count(con)
    try:
        work = out / ".kvf-work"  # per-node task files: scratch, removed after the analysis
        shutil.rmtree(work, ignore_errors=True)
        try:
            files, ran = analyze(con, replace(run, execution=replace(run.execution, workdir=work)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        plan = possible_pairs_plan(con, possible_pairs)
        with timed("write_findings"):
            counts = write_findings(con, out, plan)
        headline = findings_headline(con)
        damage = damage_rows(con)
        tiers = findings_source_tier(con)
        reliability = findings_tier_reliability(con)
        warnings = [r[0] for r in con.execute("SELECT message FROM cohort_warnings ORDER BY rule").fetchall()]
        from forensics.report import render_report

        with timed("report"):
            render_report(
                con,
                out,
                config=run.config,
                files=files,
                rules=list(run.rules),
                as_of=run.as_of,
                notice_templates=notice_templates,
            )
        manifest = {
            "evidence_damage": damage,  # every loss the evidence shows (evidence_damage.csv)
            "incident": {"id": run.config.incident.get("id"), "report": run.config.report.describe()},
            "inputs": [f.manifest_entry() for f in files],
            "config": {"path": "bundle.toml", "sha256": run.config.sha256},
            # the operator's jurisdictions table and accounts file ([disclosure]), hashed as read
            "disclosure_files": run.config.disclosure["jurisdictions"]["files"],
            "exclusions": {
                "path": str(run.exclusions.name) if run.exclusions else None,
                "sha256": sha256_file(run.exclusions)[0] if run.exclusions else None,
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
            "gateway_join": gateway_join_summary(con),
            "possible_sources": plan,
            "window": run.window.describe() if run.window.active else None,
            "self_contained": self_contained,  # False: incident.duckdb reads the bundle's Parquet files in place
            "execution": ran.manifest(),
        }
        write_json(manifest, out / "manifest.json")
        if self_contained:
            with timed("copy_in_place"):
                copy_in_place(con)
        with timed("publish"):
            publish(con)
    finally:
        con.close()
    shutil.rmtree(Path(str(db_path) + ".tmp"), ignore_errors=True)
    make_private(db_path)
    # for scripts (--json): the threads each task's DuckDB and compiled walks had, the run's --threads shared
    # among the workers (nodes.task_threads)
    tasks = (
        {
            "tasks_run": ran.tasks_run,
            "reused": ran.reused,
            "workers": ran.workers,
            "task_threads": sorted({t["threads"] for t in ran.tasks}),
        }
        if ran.apart
        else None
    )
    return InvestigationResult(
        out,
        counts,
        headline,
        tasks,
        source_tiers=tiers,
        tier_reliability=reliability,
        possible_pairs=plan,
        execution=ran,
        threads=run_threads,
        damage=damage,
        cohort_warnings=warnings,
    )


def ingest_bundle(bundle: Path, db: Path, exclusions: Path | None = None, self_contained: bool = False) -> IngestResult:
    with private_files():  # the database and manifest hold customer identifiers
        result = _ingest_bundle(bundle, db, exclusions, self_contained)
    make_private(db)
    return result


def _ingest_bundle(bundle: Path, db: Path, exclusions: Path | None, self_contained: bool) -> IngestResult:
    db.parent.mkdir(parents=True, exist_ok=True)
    # built under a scratch name and renamed over --db when complete: a failed ingest keeps the old one
    tmp = scratch_path(db, "tmp")
    try:
        con = connect(tmp)
        try:
            files, config = ingest_into(con, bundle)
            result = IngestResult(db, files, config, nodes=node_summary(con))
            excl, rules = exclusion_rules(bundle, exclusions)
            if excl:
                assign_cohorts(con, rules)
            if self_contained:
                copy_in_place(con)
            publish(con)
            result.self_contained = self_contained
        finally:
            con.close()
        Path(f"{db}.wal").unlink(missing_ok=True)  # the old database's log must not replay onto the new one
        os.replace(tmp, db)
    finally:
        for p in (tmp, Path(f"{tmp}.wal")):
            p.unlink(missing_ok=True)
        shutil.rmtree(Path(f"{tmp}.tmp"), ignore_errors=True)
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
        "warnings": counts["warnings"],
    }

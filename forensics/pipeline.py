"""The jobs, stage by stage: investigate (intake -> ingest -> cohorts -> ownership -> findings ->
report, into one output folder), ingest_bundle (ingest and cohorts only, into one database) and
preview_cohorts (the gateway log and the exclusion rules only)."""

from __future__ import annotations

import getpass
import json
import os
import platform
import shlex
import shutil
import sys
from dataclasses import dataclass, field, replace
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
from forensics.errors import InputError
from forensics.findings import OUTPUTS, compute_findings, possible_pairs_plan, write_findings
from forensics.findings import headline as findings_headline
from forensics.findings import source_tier as findings_source_tier
from forensics.findings import tier_reliability as findings_tier_reliability
from forensics.findings.damage import damage_line, damage_rows, lost_phrase
from forensics.ingest import copy_in_place, in_place_note, ingest_gateway, ingest_into, node_summary
from forensics.ingest.gateway import gateway_join_summary
from forensics.intake import BundleConfig, InputFile, Window, sha256_file
from forensics.outputs import (
    carry_over,
    check_swappable,
    is_scratch,
    keep_mode,
    make_private,
    private_files,
    recover,
    scratch_path,
    swap_in,
    write_json,
    write_parquet,
)
from forensics.ownership import Execution, NodeRun, engine_loader, on_cluster, rebuild_ownership
from forensics.report.blast import BLAST_FILES
from forensics.report.notices import check_notice_templates
from forensics.report.render import PARTS as REPORT_PARTS
from forensics.run import Run, load_run


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
        for f in self.files:  # what ingest alone knows of each loss (investigate estimates what cut streams lost)
            for d in f.damage:
                lines.append(_printable(f"  DAMAGED {f.rel}: {d.detail} ({lost_phrase(d.records_lost, d.lost_basis)})"))
            if f.error and not f.damage:
                lines.append(f"  UNREADABLE {f.rel}: {f.error}")
        if self.nodes:
            lines.append("  nodes: node, role, pool tokens, page size, context length, page events")
            for n in self.nodes:
                lines.append("    " + ", ".join("-" if v is None else str(v) for v in n))
        lines.append(in_place_note(self.self_contained))
        return "\n".join(lines)


def _ranged(count: int, overlap: int) -> str:
    """A count of affected rows as the distinct responses it may be: a range where rows may be one response
    twice (response_overlap), else the count itself."""
    return f"{count - overlap} to {count}" if overlap else str(count)


def _printable(text: str) -> str:
    """A line of the summary as the terminal may show it: account ids, file paths and column names come
    from the evidence, and no control character of theirs (a terminal escape) reaches the terminal."""
    return "".join(c if c.isprintable() else "?" for c in text)


@dataclass
class InvestigationResult:
    out: Path
    counts: dict[str, int]
    headline: dict[str, int]
    tasks: dict[str, Any] | None = None  # per-node tasks run and reused, their workers and threads, when apart
    self_contained: bool = False
    execution: NodeRun | None = None  # what the per-node work ran (forensics.ownership.execution.nodes)
    source_tiers: dict[str, Any] | None = None  # what the evidence measured of the likely subset (source_tier)
    # what the page evidence measured of each indeterminate tier without it (tier_reliability)
    tier_reliability: list[dict[str, Any]] = field(default_factory=list)
    possible_pairs: dict[str, Any] | None = None  # the possible pairs counted, and whether their CSV was written
    threads: int | None = None  # the run's own DuckDB threads: ingest, findings and the allocator model's walks
    damage: list[dict[str, Any]] = field(default_factory=list)  # evidence_damage's rows (forensics.findings.damage)
    # rules on client-controlled fields alone that moved customers out of the customer cohort (cohorts.preview)
    cohort_warnings: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # what an earlier run killed outright left, settled

    def summary(self) -> str:
        h = self.headline
        # every loss first: the counts below hold only for the evidence that could be read
        lines = [*self.recovered]
        lines += [_printable(damage_line(d)) for d in self.damage] or ["No damage found in the evidence read."]
        lines += [
            f"Affected responses: {_ranged(h['affected'], h['possible_overlap'])} ({h['confirmed']} confirmed, "
            f"{h['indeterminate']} indeterminate); "
            f"customer cohort: {_ranged(h['customer'], h['customer_possible_overlap'])} "
            f"({h['customer_confirmed']} confirmed, "
            f"{h['customer_indeterminate']} indeterminate: they may have been affected)"
            + (f"; account unknown (no gateway record): {h['unknown_account']}" if h.get("unknown_account") else "")
            + (
                f"; up to {h['possible_overlap']} rows may be the same response as another (response_overlap: "
                "rooms no gateway record names, records that name no room)"
                if h["possible_overlap"]
                else ""
            ),
            f"Exposure pairs proven by page events: {h['pairs']}; hazards: {self.counts.get('hazards.csv', 0)}; "
            f"rejected input rows: {self.counts.get('rejected.csv', 0)}",
        ]
        tier = self.source_tiers or {}
        if tier.get("reason"):
            lines.append(
                f"Possible sources: likely subset printed ({tier['reason']})"
                if tier["likely_printed"]
                else f"Possible sources: no likely count ({tier['reason']})"
            )
        pairs = self.possible_pairs or {}
        if pairs.get("pairs"):
            lines.append(
                f"Possible (response, source) pairs: {pairs['pairs']:,}; possible_sources.csv "
                + ("written" if pairs["written"] else "not written")
                + f" ({pairs['why']})"
            )
        if self.tasks:
            lines.append(f"Per-node tasks: {self.tasks['tasks_run']} run, {self.tasks['reused']} reused from the cache")
        lines += ["Warning: " + _printable(w) for w in self.cohort_warnings]
        lines += [f"Findings written to {self.out}/", f"Report: {self.out / 'report.html'}"]
        return "\n".join([*lines, in_place_note(self.self_contained)])

    def to_json(self) -> str:
        """The summary for scripts: the evidence's damage first, then the headline, the row count of every
        file written, where they are."""
        rest = json.dumps(
            {
                "out": str(self.out),
                "report": str(self.out / "report.html"),
                "database": str(self.out / "incident.duckdb"),
                "headline": self.headline,
                "rows": self.counts,
                "per_node_tasks": self.tasks,
                "source_tiers": self.source_tiers,
                "tier_reliability": self.tier_reliability,
                "possible_pairs": self.possible_pairs,
                "self_contained": self.self_contained,
                "threads": self.threads,
                "cohort_warnings": self.cohort_warnings,
                "recovered": self.recovered,
            },
            sort_keys=True,
            default=str,
        )
        return '{"evidence_damage": ' + json.dumps(self.damage, sort_keys=True, default=str) + ", " + rest[1:]


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


@dataclass(frozen=True)
class Custody:
    """Who ran the job and how, for the manifest's chain of custody."""

    command: str = field(default_factory=lambda: shlex.join(["forensics", *sys.argv[1:]]))
    # the operator named on the command line, else $KVF_OPERATOR, else the login user
    operator: str = field(
        default_factory=lambda: os.environ.get("KVF_OPERATOR") or os.environ.get("USER") or getpass_user()
    )
    sign_key: Path | None = None  # the operator's Ed25519 key (forensics.custody); None: $KVF_SIGN_KEY, if set


def getpass_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


# every file and folder an investigate run writes into --out (and the scratch names of outputs.SCRATCH,
# which a command killed outright may leave): a folder holding only these is a previous run's output,
# safe to replace
OUT_NAMES = frozenset(
    {*OUTPUTS, *BLAST_FILES, "manifest.json", "incident.duckdb", custody_mod.CUSTODY, custody_mod.SIGNATURE}
    | {f"{part}.{ext}" for part in REPORT_PARTS for ext in ("html", "md")}
    | {"incident.duckdb.wal", "incident.duckdb.tmp", ".kvf-work", "parquet", "notices", "brief.html"}
    | {"pack"}  # forensics pack's folder (forensics.pack.PACK): made from a run's outputs, a rerun replaces it
)


def check_out(out: Path, config: BundleConfig, force: bool = False) -> None:
    """Refuse an --out that holds another incident's outputs, or files that are not ours, unless
    `force`: writing over them would destroy evidence of another investigation."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    if force:
        return
    entries = sorted(p.name for p in out.iterdir())
    foreign = [n for n in entries if n not in OUT_NAMES and not is_scratch(n)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise InputError(
            f"--out {out}: holds files that are not this tool's outputs ({shown}); choose an empty or new "
            "folder, or pass --force to write into it anyway"
        )
    previous = _manifest_incident(out / "manifest.json")
    mine = config.incident.get("id")
    if previous is not None and previous != (str(mine) if mine is not None else None):
        raise InputError(
            f"--out {out}: holds the outputs of incident {previous or '(no id)'} (manifest.json), not of "
            f"{mine or '(no id)'}; choose another folder, or pass --force to overwrite them"
        )


def _manifest_incident(path: Path) -> str | None:
    """The incident id a previous run's manifest records ('' when it records none; None: no manifest)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    inc = data.get("incident") if isinstance(data, dict) else None
    return str(inc.get("id") or "") if isinstance(inc, dict) else ""


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what mkdir(parents=True) creates)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


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
    created = _first_missing(target.parent)
    staging = scratch_path(target, "staging")
    try:
        with private_files():
            staging.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
            result = _investigate(run, staging, self_contained, possible_pairs, notice_templates)
            if parquet:
                result.counts.update(_export_parquet(staging))
            if force:
                carry_over(target, staging, ours=lambda name: name in OUT_NAMES)
        keep_mode(target, staging)
        _record_custody(staging, custody, started, bundle, run.exclusions, previous=target)
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


# the findings tables --parquet exports (the large ones first): typed copies for other tools
PARQUET_TABLES = ("exposures", "possible_sources", "affected_responses", "accounts", "hazards", "coverage")


def _export_parquet(out: Path) -> dict[str, int]:
    folder = out / "parquet"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    con = connect(out / "incident.duckdb")
    try:
        with timed("parquet"):
            return {f"parquet/{t}.parquet": write_parquet(con, t, folder / f"{t}.parquet") for t in PARQUET_TABLES}
    finally:
        con.close()
        shutil.rmtree(out / "incident.duckdb.tmp", ignore_errors=True)


def _record_custody(
    out: Path, custody: Custody, started: datetime, bundle: Path, exclusions: Path | None, previous: Path
) -> None:
    """The manifest's `run` section: the command, the operator, when, the bundle folder, the manifest
    `previous` (the --out being replaced) held, kept in custody/ (the chain), and the SHA-256 of every
    output as written. The rest of the manifest is a function of the evidence (byte-identical run after
    run); this section is not, and says so by its place."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    link = custody_mod.keep_previous(previous, out)
    outputs = sorted(p for p in out.rglob("*") if p.is_file() and p.name not in custody_mod.UNLISTED)
    manifest["run"] = {
        "command": custody.command,
        "operator": custody.operator,
        "bundle": str(bundle.resolve()),
        "exclusions": str(exclusions.resolve()) if exclusions else None,
        "previous_manifest": link,
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "outputs_sha256": {p.relative_to(out).as_posix(): sha256_file(p)[0] for p in outputs},
    }
    write_json(manifest, path)


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

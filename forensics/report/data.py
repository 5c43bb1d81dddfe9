"""Report stage, data: plain dicts and lists for the templates, from report/queries/*.sql.

Reads: affected_responses, exposures, exposure_segments, accounts, coverage, hazards, read_provenance,
room_requests, request_cohort, cohort_rules, cohort_warnings (temp, investigate's), clock_bounds, seq_gaps,
node_config, gateway, files, rejected, timeline, room_state, write_effects, node_audit, evidence_damage.
Writes: temp tables report_affected, report_prov.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import duckdb

import forensics
from forensics.cohorts import Rule
from forensics.db import query_rows, rows_of, scalar
from forensics.engines import ENGINES
from forensics.engines.sglang_startup import NAME as SGLANG
from forensics.findings.bounds import ranged, split
from forensics.findings.damage import lost_phrase
from forensics.intake import BundleConfig, InputFile
from forensics.report import disclosure
from forensics.report.charts import status_buckets
from forensics.report.jurisdictions import jurisdiction_rows
from forensics.report.provenance import MAX_RANGES, PROVENANCE_LIMIT, provenance_blocks

MAX_TABLE_ROWS = 100  # long lists (sources, shared prefixes) are cut in the report, whole in their CSV


def rows(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> list[dict[str, Any]]:
    """Run report/queries/<name>.sql (a SELECT) and return its rows as dicts."""
    return query_rows(con, "report", name, **params)


def manifest_hash(files: list[InputFile]) -> str:
    """sha256 over the sorted input-file hashes, one per line: names the evidence set, not its paths."""
    hashes = sorted(f.sha256 for f in files if f.sha256)
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()


def _engine_audit(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, dict[str, Any]], str]:
    """Per node verdict from the engine-log audit ingest ran (node_audit), and why it failed ('' if it
    did not). A failure is named in the report, not hidden: the verdicts then come from node_config."""
    audits = rows(con, "node_audit")
    failed = [a["reason"] for a in audits if a["node"] is None]
    if failed:
        return {}, failed[0]
    return {
        a["node"]: {
            "verdict": a["verdict"],
            "reason": a["reason"],
            "max_input": a["max_req_input_len"],
            "evidence": list(a["evidence_lines"]),
        }
        for a in audits
    }, ""


def _root_cause(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    nodes = rows(con, "root_cause")
    audit, audit_error = _engine_audit(con)
    for n in nodes:
        a = audit.get(n["node"])
        pool, ctx = n["pool_tokens"], n["context_len"]
        fallback = "unknown" if pool is None or ctx is None else "pool_smaller_than_context" if pool < ctx else "ok"
        n["verdict"] = a["verdict"] if a else fallback
        n["reason"] = a["reason"] if a else ""
        n["evidence"] = a["evidence"] if a else []
    # nodes of another engine than SGLang: their start-up facts alone are read (forensics.ingest.startup)
    other = [{"node": n["node"], "engine": ENGINES[n["engine"]].label} for n in nodes if n["engine"] != SGLANG]
    windows = rows(con, "leak_windows")
    return {
        "nodes": nodes,
        "other_engines": other,
        "windows": windows,
        "audited": bool(audit),
        "audit_error": audit_error,
    }


def _clocks(config: BundleConfig, window: dict[str, Any]) -> dict[str, Any]:
    return {
        "first_at": window["first_at"],
        "last_at": window["last_at"],
        "first_customer_at": window["first_customer_at"],
        "first_customer_confirmed_at": window["first_customer_confirmed_at"],
        "last_customer_at": window["last_customer_at"],
        "discovered_at": config.discovered_at,
    }


# what an indeterminate response says of its reliability where no tier measures it (the indeterminate
# tiers without page evidence are measured where the bundle allows: tier_reliability), since silence
# would read as certainty
NO_RELIABILITY = (
    "no reliability could be measured: nothing in this evidence settles how often such a response was affected"
)
# how the combined sentence names each tier of responses without page evidence
TIER_NAMES = {"late_write": "late writes", "signature": "placeholder signatures"}


def reliability(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Per indeterminate tier (late_write, signature) its measured reliability as one sentence
    (tier_reliability.basis); under "logs" the sentence for the responses the engine logs alone leave
    indeterminate (each tier that has such responses, named; NO_RELIABILITY where none has); under "all"
    that of every indeterminate response: the tiers, and NO_RELIABILITY for those with page evidence."""
    tiers = rows(con, "tier_reliability")
    out = {t["tier"]: t["basis"] for t in tiers}
    named = [f"{TIER_NAMES.get(t['tier'], t['tier'])}: {t['basis']}" for t in tiers if t["indeterminate"]]
    if named and tiers[0]["logs_indeterminate"] > sum(t["indeterminate"] for t in tiers):
        named.append(f"the others: {NO_RELIABILITY}")  # a signature missing a part: no tier measures it
    out["logs"] = "; ".join(named) or NO_RELIABILITY
    if tiers and tiers[0]["pages_indeterminate"]:
        named.append(f"responses with page records: {NO_RELIABILITY}")
    out["all"] = "; ".join(named) or NO_RELIABILITY
    return out


def _mechanism_counts(mechanisms: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per mechanism, confirmed and indeterminate apart, customers and all cohorts: "were" is said of
    the confirmed ones only. A response has one status and one evidence, so the rows add up."""
    out = {}
    for m in ("stale", "foreign_write"):
        rows = [r for r in mechanisms if r["mechanism"] == m]
        sure = [r for r in rows if r["status"] == "confirmed"]
        out[m] = {
            "customer": sum(r["customer_responses"] for r in rows),
            "customer_confirmed": sum(r["customer_responses"] for r in sure),
            "all": sum(r["responses"] for r in rows),
            "all_confirmed": sum(r["responses"] for r in sure),
        }
        for k in ("customer", "all"):
            out[m][f"{k}_indeterminate"] = out[m][k] - out[m][f"{k}_confirmed"]
    return out


def _share(part: int, whole: int, noun: str) -> str:
    """part of whole, in words a reader can weigh: "3,551 of 3,583 customer requests, 99.1%"."""
    if not whole:
        return f"{part:,} {noun}"
    return f"{part:,} of {whole:,} {noun}, {100 * part / whole:.1f}%"


def bound_context(t: dict[str, Any]) -> dict[str, str]:
    """The upper bound on exposed customer data put in context: the customer requests and accounts it
    reaches against all the evidence holds. A bound of nearly everything says the logs cannot narrow it.
    The requests whose account is unknown (rooms no gateway record names) are left out of the share: they
    may be the engine side of the same gateway records, so beside the records' count they are no part of
    it (counted in, a bound could read "299 of 267 customer requests, 112%"); the text names them apart."""
    accounts, total = t["possible_customer_source_accounts"] or 0, t["customer_accounts"] or 0
    every = bool(total) and accounts >= total
    known = (t["possible_customer_sources"] or 0) - (t["possible_customer_source_unknown"] or 0)
    return {
        "requests": _share(known, t["requests_after"] or 0, "customer requests of known accounts"),
        "accounts": "every customer account" if every else _share(accounts, total, "customer accounts"),
    }


def overlap_context(t: dict[str, Any]) -> dict[str, str]:
    """The affected counts as the distinct responses they are (response_bounds): each written by
    findings.bounds, a range where rows may be one response twice (response_overlap: a room no gateway
    record names and a record that names no room, which nothing in the evidence joins or tells apart), else
    the count; the split by status the same way, so that it counts what the headline counts. why: empty
    where no row may be another's (the counts are then exact)."""
    out = {"why": ""}
    for side in ("after", "before"):
        hi, confirmed = t[f"affected_{side}"] or 0, t[f"confirmed_{side}"] or 0
        out[side] = ranged(hi - (t[f"overlap_{side}"] or 0), hi)
        out[f"confirmed_{side}"] = ranged(t[f"confirmed_least_{side}"], confirmed)
        out[f"indeterminate_{side}"] = ranged(t[f"indeterminate_least_{side}"], hi - confirmed)
        out[f"split_{side}"] = split(
            (t[f"confirmed_least_{side}"], confirmed), (t[f"indeterminate_least_{side}"], hi - confirmed)
        )
    n = t["overlap_before"] or 0
    if n:
        out["why"] = (
            f"up to {n:,} of the rows may {'each ' if n != 1 else ''}be the same response as another: responses "
            "the page records "
            "show in rooms no gateway record names (the account "
            "unknown, counted as a customer's), and the responses of gateway records that name no room, "
            "which may have been served in those rooms; nothing in the evidence joins the two or tells them "
            "apart (a gateway that logs no room or decode node, an engine whose lines name no room), so "
            "each count is a range of distinct responses, its split by status too: at most every row a "
            "distinct response, at least every row less the most such rooms that can each be a different "
            "one of those records' responses (response_bounds)"
        )
    return out


def gather(
    con: duckdb.DuckDBPyConnection,
    *,
    config: BundleConfig,
    files: list[InputFile],
    rules: list[Rule],
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """The templates' data. Reads the tables of the report's steps (forensics.report.REPORT_STEPS:
    report_affected, report_sources, the provenance's), which render_report runs first."""
    window = rows(con, "window")[0]
    span = window["span_hours"] or 0.0
    bucket = "hour" if span <= 72 else "day"
    hours = rows(con, "blast_hours", bucket=bucket)
    totals = rows(con, "exclusion_totals")[0]
    warned = rows(con, "cohort_warnings")
    # source requests (report_sources, made with blast_sources.csv): the first rows and the count
    first = f"SELECT * FROM report_sources ORDER BY source_request_id, source_room LIMIT {MAX_TABLE_ROWS}"
    sources = rows_of(con, first)
    sources_total = int(scalar(con, "SELECT count(*) FROM report_sources"))
    incident = config.incident
    ctx = {
        "header": {
            "incident_id": str(incident.get("id") or "(no incident id in bundle.toml)"),
            "title": str(incident.get("title") or "KV-cache cross-request exposure"),
            "report_version": config.report.version,
            "report_phase": config.report.phase,
            "supersedes": config.report.supersedes,
            "tool_version": forensics.__version__,
            "duckdb_version": duckdb.__version__,
            "manifest_hash": manifest_hash(files),
            "as_of": as_of,
        },
        "max_rows": MAX_TABLE_ROWS,
        "contact": str(incident.get("contact") or ""),
        "clocks": _clocks(config, window),
        "totals": totals,
        "scope": rows(con, "scope_status"),
        "cohorts": rows(con, "cohort_counts"),
        "cohort_warnings": [r["message"] for r in warned],
        "cohort_warning_rules": [r["rule"] for r in warned],
        "rules": rows(con, "rule_counts"),
        "has_rules": bool(rules),
        "matrix": rows(con, "exposure_matrix"),
        "nodes": rows(con, "blast_nodes"),
        "sources": sources,
        "sources_total": sources_total,
        "timeline": {"bucket": bucket, "rows": status_buckets(hours, bucket)},
        "root_cause": _root_cause(con),
        "coverage": rows(con, "coverage"),
        "window": rows(con, "replay_window")[0],
        "annex": rows(con, "account_annex"),
        "clean_nodes": rows(con, "clean_nodes"),
        "integrity": rows(con, "integrity_lines"),
        "shared_prefix": rows(con, "shared_prefix"),
        "hazards": rows(con, "hazard_counts"),
        "clock_bounds": rows(con, "clock_bounds"),
        "allocator_model": rows(con, "allocator_model"),
        "seq_gaps": rows(con, "seq_gaps"),
        "provenance": provenance_blocks(
            rows(con, "prov_shown", max_ranges=MAX_RANGES),
            rows(con, "prov_summary"),
            rows(con, "prov_reads"),
            rows(con, "prov_list"),
            totals["confirmed_before"],
            PROVENANCE_LIMIT,
        ),
        "files": rows(con, "input_files"),
        # part 1's first block and a line of the brief: every loss, with its records lost as known
        "damage": [
            {**d, "lost": lost_phrase(d["records_lost"], d["lost_basis"])} for d in rows(con, "evidence_damage")
        ],
        "rejected": rows(con, "rejected_summary"),
        "remediation": {str(k): v for k, v in sorted(config.remediation.items())},
    }
    return _summary(con, ctx, config, as_of)


def _summary(con: duckdb.DuckDBPyConnection, ctx: dict[str, Any], config: BundleConfig, as_of: datetime | None):
    """The disclosure summary's own data: the mechanisms found, the charts' rows, the notification
    annex (the rows of notifications.csv, so the two match by construction) and the disclosure fields."""
    mechanisms = rows(con, "mechanisms")
    ctx["totals"]["bound"] = bound_context(ctx["totals"])
    ctx["totals"]["overlap"] = overlap_context(ctx["totals"])
    found = {
        "researcher_requests": sum(c["affected"] or 0 for c in ctx["cohorts"] if c.get("kind") == "researcher"),
    }
    notifications = disclosure.notification_rows(rows(con, "notifications"))
    ctx.update(
        mechanisms={m: [r for r in mechanisms if r["mechanism"] == m] for m in ("stale", "foreign_write")},
        mechanism_counts=_mechanism_counts(mechanisms),
        reliability=reliability(con),
        charts={
            "daily": rows(con, "timeline_cohorts", bucket="day"),
            "hourly": rows(con, "timeline_cohorts", bucket="hour"),
            "nodes": rows(con, "node_cohorts"),
        },
        notifications=notifications,
        deadlines=disclosure.deadlines(config, as_of),
        jurisdictions=jurisdiction_rows(config, [n["account_id"] for n in notifications], as_of),
        incident_timeline=disclosure.timeline(config, ctx["clocks"], as_of),
        fields=disclosure.fields(config, ctx["totals"], found, ctx["contact"], as_of),
    )
    return ctx

"""Report stage, per-response provenance in the style of a memory checker (Valgrind's "Invalid read
... free'd at ... alloc'd at"): for each confirmed exposure, where the reader attended, who wrote
the slots and how, when they were freed, and when the reader got them.

Input: slot ranges merged in SQL (prov_stale/, prov_foreign.sql, prov_ranges.sql), only the first
MAX_RANGES per response plus per-response counts; output: blocks of plain text lines.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from forensics.outputs import fmt_ts

MAX_RANGES = 8  # per response: the rest is counted, and in exposures.csv / incident.duckdb
PROVENANCE_LIMIT = 200  # recipients whose provenance part 2 shows (prov_recipients.sql)


def _t(value: datetime | None) -> str:
    return fmt_ts(value) if value is not None else "(no stamp)"


def _interval(lo: datetime | None, hi: datetime | None) -> str:
    if lo is None or hi is None or _t(lo) == _t(hi):
        return "at " + _t(lo if lo is not None else hi)
    return f"between {_t(lo)} and {_t(hi)}"


def _who(r: dict[str, Any]) -> str:
    if not r["source_request_id"]:
        return f"room {r['source_room']} (no gateway request)"
    return f"{r['source_request_id']} ({r['source_account_id']}, {r['source_cohort']})"


def _how(r: dict[str, Any]) -> str:
    node = r["node"]
    if r["write_op"] == "xfer":
        return (
            f"via transfer from {r['write_sender']}, landed {_interval(r['write_ts'], r['write_ts_hi'])} ({node} clock)"
        )
    return f"by a {r['write_src'] or 'local'} write on {node} at {_t(r['write_ts'])}"


def _stale_lines(r: dict[str, Any], reader: str) -> list[str]:
    lines = [f"  slots [{r['seg_start']},{r['seg_end']}) written by {_who(r)}", f"              {_how(r)}"]
    freed = f"freed at {_t(r['free_ts'])}" if r["free_ts"] is not None else "free not logged"
    lines.append(f"              {freed}; allocated to {reader} at {_t(r['alloc_ts'])}")
    return lines


def _foreign_lines(r: dict[str, Any], reader: str) -> list[str]:
    lines = [
        f"  slots [{r['seg_start']},{r['seg_end']}) overwritten by {_who(r)}",
        f"              {_how(r)}",
        f"              while {reader} attended them",
    ]
    if r["free_ts"] is not None and r["free_room"] == r["source_room"]:
        lines.append(f"              the writer had freed them at {_t(r['free_ts'])} (abort mid-transfer)")
    return lines


def _block(
    rec: dict[str, Any], ranges: list[dict[str, Any]], summary: dict[str, Any], reads: list[dict[str, Any]]
) -> dict[str, Any]:
    rid = rec["request_id"]
    kinds_seen = {r["kind"] for r in ranges}
    kinds = (["STALE-KV READ"] if "stale" in kinds_seen else []) + (
        ["FOREIGN WRITE"] if "foreign" in kinds_seen else []
    )
    tokens = rec["completion_tokens"] if rec["completion_tokens"] is not None else "?"
    title = (
        f"{' + '.join(kinds)}  {rid} ({rec['account_id']}, {rec['cohort']}) HTTP {rec['http_status']}, {tokens} tokens"
    )
    lines: list[str] = []
    by_read: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for r in reads:  # one line per read event: node and time, with every slot range it bound
        by_read.setdefault((r["node"], _t(r["read_ts"])), []).append((r["read_start"], r["read_end"]))
    for (node, ts), spans in sorted(by_read.items()):
        slots = " ".join(f"[{a},{b})" for a, b in sorted(set(spans), key=lambda s: (s[0] or 0, s[1] or 0)))
        lines.append(f"  read at     {node} {ts}, slots {slots}")
    for r in ranges[:MAX_RANGES]:
        lines += _stale_lines(r, rid) if r["kind"] == "stale" else _foreign_lines(r, rid)
    total = summary.get("ranges", 0)
    if total > MAX_RANGES:
        lines.append(f"  ... {total - MAX_RANGES} more slot ranges (see exposures.csv)")
    cross = "cross-account" if summary.get("cross_account") else "same account"
    lines.append(
        f"  verdict     confirmed; {rec['exposed_slots']} exposed slots from {summary.get('sources', 0)} "
        f"source request(s); {cross}"
    )
    return {"request_id": rid, "title": title, "lines": lines}


def provenance_blocks(
    ranges: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
    reads: list[dict[str, Any]],
    recipients: list[dict[str, Any]],
    confirmed_total: int,
    limit: int,
) -> dict[str, Any]:
    """Blocks for the printed responses from prov_shown (the first ranges of each), prov_summary and
    prov_reads (see report/queries/prov_ranges.sql)."""
    by_ranges: dict[str, list[dict[str, Any]]] = {}
    by_reads: dict[str, list[dict[str, Any]]] = {}
    for r in ranges:
        by_ranges.setdefault(r["request_id"], []).append(r)
    for r in reads:
        by_reads.setdefault(r["request_id"], []).append(r)
    by_summary = {s["request_id"]: s for s in summaries}
    blocks = [
        _block(rec, by_ranges.get(rid, []), by_summary.get(rid, {}), by_reads.get(rid, []))
        for rec in recipients
        for rid in (rec["request_id"],)
    ]
    return {"blocks": blocks, "shown": len(blocks), "confirmed_total": confirmed_total, "limit": limit}

"""Report stage, per-response provenance in the style of a memory checker (Valgrind's "Invalid read
... free'd at ... alloc'd at"): for each confirmed exposure, where the reader attended, who wrote
the slots and how, when they were freed, and when the reader got them.

Input: rows of prov_stale.sql / prov_foreign.sql (one per elementary segment); output: blocks of
plain text lines, segments merged into slot ranges.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from forensics.outputs import fmt_ts

MAX_RANGES = 8  # per response: the rest is counted, and in exposures.csv / incident.duckdb
FOREIGN_KEY = (
    "node",
    "read_ts",
    "read_start",
    "read_end",
    "source_room",
    "source_request_id",
    "source_account_id",
    "source_cohort",
    "write_op",
    "write_src",
    "write_sender",
    "write_ts",
    "write_ts_hi",
    "free_room",
    "free_ts",
)
STALE_KEY = (*FOREIGN_KEY, "alloc_ts")


def _t(value: datetime | None) -> str:
    return fmt_ts(value) if value is not None else "(no stamp)"


def _interval(lo: datetime | None, hi: datetime | None) -> str:
    if lo is None or hi is None or _t(lo) == _t(hi):
        return "at " + _t(lo if lo is not None else hi)
    return f"between {_t(lo)} and {_t(hi)}"


def merge_ranges(segs: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """Adjacent segments with the same history become one [start, end) range."""
    out: list[dict[str, Any]] = []
    for s in sorted(segs, key=lambda r: (r["seg_start"], r["seg_end"])):
        prev = out[-1] if out else None
        if prev and prev["seg_end"] == s["seg_start"] and all(prev[k] == s[k] for k in key):
            prev["seg_end"] = s["seg_end"]
        else:
            out.append(dict(s))
    return out


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


def _block(rec: dict[str, Any], stale: list[dict[str, Any]], foreign: list[dict[str, Any]]) -> dict[str, Any]:
    rid = rec["request_id"]
    kinds = (["STALE-KV READ"] if stale else []) + (["FOREIGN WRITE"] if foreign else [])
    tokens = rec["completion_tokens"] if rec["completion_tokens"] is not None else "?"
    title = (
        f"{' + '.join(kinds)}  {rid} ({rec['account_id']}, {rec['cohort']}) HTTP {rec['http_status']}, {tokens} tokens"
    )
    lines: list[str] = []
    ranges = [("stale", r) for r in merge_ranges(stale, STALE_KEY)] + [
        ("foreign", r) for r in merge_ranges(foreign, FOREIGN_KEY)
    ]
    reads: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for _, r in ranges:  # one line per read event: node and time, with every slot range it bound
        reads.setdefault((r["node"], _t(r["read_ts"])), []).append((r["read_start"], r["read_end"]))
    for (node, ts), spans in sorted(reads.items()):
        slots = " ".join(f"[{a},{b})" for a, b in sorted(set(spans), key=lambda s: (s[0] or 0, s[1] or 0)))
        lines.append(f"  read at     {node} {ts}, slots {slots}")
    for kind, r in ranges[:MAX_RANGES]:
        lines += _stale_lines(r, rid) if kind == "stale" else _foreign_lines(r, rid)
    if len(ranges) > MAX_RANGES:
        lines.append(f"  ... {len(ranges) - MAX_RANGES} more slot ranges (see exposures.csv)")
    sources = {r["source_request_id"] or f"room {r['source_room']}" for _, r in ranges}
    accounts = {r["source_account_id"] for _, r in ranges}
    cross = "cross-account" if accounts - {rec["account_id"]} else "same account"
    lines.append(
        f"  verdict     confirmed; {rec['exposed_slots']} exposed slots from {len(sources)} source request(s); {cross}"
    )
    return {"request_id": rid, "title": title, "lines": lines}


def provenance_blocks(
    stale: list[dict[str, Any]],
    foreign: list[dict[str, Any]],
    recipients: list[dict[str, Any]],
    confirmed_total: int,
    limit: int,
) -> dict[str, Any]:
    by_stale: dict[str, list[dict[str, Any]]] = {}
    by_foreign: dict[str, list[dict[str, Any]]] = {}
    for r in stale:
        by_stale.setdefault(r["request_id"], []).append(r)
    for r in foreign:
        by_foreign.setdefault(r["request_id"], []).append(r)
    blocks = [
        _block(rec, by_stale.get(rec["request_id"], []), by_foreign.get(rec["request_id"], [])) for rec in recipients
    ]
    return {"blocks": blocks, "shown": len(blocks), "confirmed_total": confirmed_total, "limit": limit}

"""Watch, integrity lines: the engines' own integrity lines (forensics.engines.integrity) alerted as soon as
they are written, each kind its own alert: canary_violation (SGLang's KV canary: a slot that did not hold
what its holder wrote), checksum_mismatch (the KV that landed in a room is not what prefill sent),
nixl_failure, nixl_expired (vLLM's NIXL connector) and mooncake_failure (Mooncake's transfer engine). A
line is read by SGLang's line reader (the canary and checksum are shapes of its table) and, where that
gives no integrity row, by the transfer libraries' table; a line of a node of another engine with a reader
of its own (vLLM's), by that reader, with its time: the same functions investigate reads them with.
Repeats are alerted once: per node and slot (canary), room (checksum), request (NIXL) or peer (Mooncake)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines import integrity
from forensics.engines.facts import EngineRows, ReadLine
from forensics.engines.sglang import SHAPES
from forensics.engines.sglang.reader import READER

KINDS = tuple(integrity.KINDS)
LITERALS = (
    *SHAPES["kv_canary_violation"].literals,
    *SHAPES["kv_checksum_mismatch"].literals,
    *integrity.LITERALS,
)
BYTES = tuple(lit.encode() for lit in LITERALS)
MARKERS = re.compile(b"|".join(re.escape(lit) for lit in BYTES))


def holds_one(data: bytes) -> bool:
    """Whether a chunk holds an integrity literal: a substring search per literal, faster on a chunk
    without any (the common case) than the alternation."""
    return any(lit in data for lit in BYTES)


def rows_of(raw: bytes, node: str, lineno: int, tz: ZoneInfo, read: ReadLine | None = None) -> list[dict[str, Any]]:
    """The integrity rows of one line (none: not an integrity line, or rejected); `read`: the node's
    engine's own line reader where it has one (vLLM's, which gives a NIXL line its record's time)."""
    rows = EngineRows()
    (read or READER.text)(raw, node, 0, lineno, tz, rows)
    if not rows.integrity and read is None:
        integrity.read_text_line(raw, node, 0, lineno, rows)
    return rows.integrity


def lines(data: bytes, before: int) -> Iterator[tuple[int, bytes]]:
    """The lines of a chunk of whole lines that hold an integrity literal, with their line numbers."""
    line, pos, last = before, 0, -1
    for m in MARKERS.finditer(data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        if start <= last:
            continue
        line += data.count(b"\n", pos, start) + 1
        end = data.find(b"\n", m.start())
        end = len(data) - 1 if end < 0 else end
        pos, last = end + 1, start
        yield line, data[start : end + 1]


def dedupe_key(r: dict[str, Any]) -> str:
    """What makes two lines one alert: the slot a canary names, the room a checksum names, the request a
    NIXL line names, the peer a Mooncake line names; else the line itself."""
    kind = r["kind"]
    what = {
        "canary_violation": f"slot {r['slot']}",
        "checksum_mismatch": f"room {r['room']}",
        "nixl_failure": f"request {r['request_id']} {r['reason']}",
        "nixl_expired": f"request {r['request_id']} {r['reason']}",
        "mooncake_failure": str(r["address"] or "").split(" local_nic=")[0].split(" peer_nic=")[-1],
    }[kind]
    return f"{kind}\t{r['node']}\t{what}"


def summary(r: dict[str, Any]) -> str:
    """One sentence: what the line proves, and no more."""
    kind = r["kind"]
    if kind == "canary_violation":
        reason = r["reason"] or ""
        if integrity.is_read_violation(reason):
            what = "held KV other than what its holder wrote, at that read (whose KV it was, the line does not say)"
        elif "launch_tag=SWEEP_" in reason:
            what = "failed a sweep of the cached slots (no read named; whose KV it was, the line does not say)"
        else:
            what = "failed the canary's write check (its stamp, not a read)"
        return f"{r['node']}: KV canary: slot {r['slot']} position {r['position']} {what}: {r['reason']}"
    if kind == "checksum_mismatch":
        return (
            f"{r['node']}: KV checksum mismatch on room {r['room']} (request {r['request_id']}): the KV in its pages "
            "is not what prefill sent; SGLang aborts the request before it emits a token"
        )
    if kind == "nixl_failure":
        return f"{r['node']}: NIXL transfer failure for request {r['request_id']}: {r['reason']}"
    if kind == "nixl_expired":
        return f"{r['node']}: NIXL KV of request {r['request_id']}: {r['reason']}"
    return f"{r['node']}: Mooncake transfer failure ({r['address']}): {r['reason']}"

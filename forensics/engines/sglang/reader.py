"""SGLang's per-line reader, the reference: one line of a text log (its record prefix, then the first
shape of SHAPES whose literal it holds and whose pattern matches) or one --log-requests JSON record into
rows. Ingest reads the lines its bulk reader leaves through it (forensics.ingest.bulk), and whole files
where DuckDB cannot (forensics.ingest.engine); the watcher feeds it the lines of growing files
(forensics.watch). Text logs carry no zone: their local time is read in the bundle's [engine]
log_timezone."""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines.facts import EngineRows, LineReader
from forensics.engines.sglang.rows import UTC, finished, json_int, received
from forensics.engines.sglang.shapes import PREFIX, READ_MARKERS, SHAPES


@lru_cache(maxsize=4096)
def _second_to_utc(ts: str, tz: ZoneInfo) -> datetime:
    """A local 'YYYY-MM-DD HH:MM:SS' in UTC: a log writes many lines per second, so each second is
    converted once (a zone's offset changes only on a whole second)."""
    return datetime.fromisoformat(ts).replace(tzinfo=tz).astimezone(UTC)


def local_to_utc(ts: str, ms: str | None, tz: ZoneInfo) -> datetime:
    base = _second_to_utc(ts, tz)
    return base.replace(microsecond=int(ms[1:].ljust(6, "0"))) if ms else base


# the table as the loop takes it: (literals, pattern's match or search, builder), in the table's order
_TRIES = [
    (shape.literals, shape.pattern.match if shape.anchored else shape.pattern.search, shape.build)
    for shape in SHAPES.values()
]


def parse_message(msg: str, base: dict[str, Any], rows: EngineRows, rank: str | None = None) -> str | None:
    """Add what `msg` says to rows; return its kind, or None for a line we do not read. A shape is tried
    only on a message holding one of its literals: every line its pattern matches holds one."""
    for literals, match, build in _TRIES:
        for lit in literals:  # a loop, not any(): this runs for every line of a log
            if lit in msg:
                if m := match(msg):
                    return build(m, msg, base, rows, rank)
                break
    return None


def parse_text_line(raw: bytes, node: str, file_id: int, lineno: int, tz: ZoneInfo, rows: EngineRows) -> bool:
    """One line of an SGLang text log into `rows` (its engine_lines row, and the request or config rows
    it gives). False when the line is rejected (the reason is in rows.rejected)."""
    if b"\x00" in raw:
        rows.rejected.append((file_id, lineno, "binary data (NUL bytes) in a text log line"))
        return False
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    m = PREFIX.match(text)
    ts = rank = None
    res = None
    msg = text
    if m:
        try:
            ts = local_to_utc(m.group("ts"), m.group("ms"), tz)
        except (ValueError, OverflowError):
            rows.rejected.append((file_id, lineno, f"bad timestamp in line prefix: {m.group('ts')}"))
            return False
        res = 1 if m.group("ms") else 1000
        rank = m.group("rank").strip() or None
        msg = m.group("msg")
    base = {"node": node, "file_id": file_id, "line": lineno, "ts": ts}
    try:
        kind = parse_message(msg, base, rows, rank)
    except (ValueError, OverflowError) as err:
        rows.rejected.append((file_id, lineno, f"SGLang message with unusable fields ({err}): {msg[:120]}"))
        return False
    if kind is None and any(k in msg for k in READ_MARKERS):
        rows.rejected.append(
            (
                file_id,
                lineno,
                "looks like an SGLang message the analysis reads, but its fields could not be parsed: " + msg[:120],
            )
        )
        return False
    rows.lines.append(
        {
            "node": node,
            "file_id": file_id,
            "line": lineno,
            "ts": ts,
            "ts_resolution_ms": res,
            "rank": rank,
            "kind": kind,
            "message": msg[:4000],
        }
    )
    return True


FORWARDED_HEADERS = ("x-request-id", "x-correlation-id")  # the ids a gateway forwards (SMG header_utils.rs)


def _forwarded(rec: dict[str, Any]) -> str | None:
    """The request id a gateway forwarded, where the record logs it: SGLang's request logger writes the
    headers named by SGLANG_LOG_REQUEST_HEADERS under "headers" (python/sglang/srt/utils/request_logger.py)."""
    headers = rec.get("headers")
    if isinstance(headers, dict):
        lower = {str(k).lower(): v for k, v in headers.items()}
        for h in FORWARDED_HEADERS:
            if isinstance(lower.get(h), str) and lower[h]:
                return lower[h][:200]
    return None


def parse_request_line(raw: bytes, node: str, file_id: int, lineno: int, tz: ZoneInfo, rows: EngineRows) -> bool:
    """One --log-requests-format json record into `rows`: a request.received or request.finished row;
    other events are read and kept out. False when the record is rejected (reason in rows.rejected)."""
    try:
        rec = json.loads(raw)
        if not isinstance(rec, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        rows.rejected.append((file_id, lineno, f"not a JSON object: {str(err)[:80]}"))
        return False
    event = rec.get("event")
    if event not in ("request.received", "request.finished"):
        return True  # other events: read and kept out of the request table
    try:
        ts = datetime.fromisoformat(str(rec["timestamp"]))
        ts = (ts.replace(tzinfo=tz) if ts.tzinfo is None else ts).astimezone(UTC)
        base = {"node": node, "ts": ts, "file_id": file_id, "line": lineno, "forwarded_id": _forwarded(rec)}
        obj = rec.get("obj") or {}
        if event == "request.received":
            ids = obj.get("input_ids")
            # a truncated list holds the string "..." (utils/request_logger): its length is unknown
            n = len(ids) if isinstance(ids, list) and all(json_int(i) for i in ids) else None
            rows.requests.extend(received(base, rec.get("rid"), obj.get("bootstrap_room"), n))
        else:
            meta = (rec.get("out") or {}).get("meta_info")
            rows.requests.append(finished(base, rec.get("rid"), obj.get("bootstrap_room"), meta))
        return True
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as err:
        rows.rejected.append((file_id, lineno, f"{event} record unusable: {str(err)[:120]}"))
        return False


# SGLang's entry's line reader (forensics.engines.sglang_startup ENGINE)
READER = LineReader(parse_text_line, parse_request_line)

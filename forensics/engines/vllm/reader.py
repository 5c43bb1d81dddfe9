"""vLLM's per-line reader, derived from its table of request line shapes (forensics.engines.vllm.shapes
SHAPES): one line of a vLLM server log (its record, then the first shape whose literal starts the message
and whose pattern matches, else the transfer libraries' integrity lines: forensics.engines.integrity) into
rows, an integrity line with its record's time. Ingest reads a vLLM node's logs through it (forensics.ingest.startup
picks it by the engine the logs name), the watcher the lines of its growing files.

A text record's time is `MM-DD HH:MM:SS` in the server's local zone (the bundle's [engine] log_timezone):
its year is the bundle's [engine] log_year, and without one the line's time is unknown (NULL), never
guessed. A JSON record (a JSON logging config) carries its year and milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines import integrity
from forensics.engines.facts import EngineRows, LineReader, ReadLine
from forensics.engines.sglang.rows import UTC
from forensics.engines.vllm.shapes import ANSI, ASCTIME, PREFIX, READ_MARKERS, SHAPES

_TRIES = [(s.literal, s.pattern, s.build) for s in SHAPES.values()]


def parse_message(msg: str, base: dict[str, Any], rows: EngineRows) -> str | None:
    """Add what `msg` says to rows; return its kind, or None for a line no shape reads."""
    for literal, pattern, build in _TRIES:
        if msg.startswith(literal):
            if m := pattern.match(msg):
                return build(m, base, rows)
            break
    return None


@lru_cache(maxsize=4096)
def _local(stamp: str, year: int, tz: ZoneInfo) -> datetime:
    """`MM-DD HH:MM:SS` of `year` in zone `tz`, in UTC (a second at a time: many lines share one)."""
    return datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz).astimezone(UTC)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _json_record(text: str, tz: ZoneInfo) -> tuple[str, datetime | None, int | None, str]:
    """(message, time, its resolution in ms, level) of a JSON logging record; ValueError when unusable."""
    rec = json.loads(text)
    if not isinstance(rec, dict) or not isinstance(rec.get("message"), str):
        raise ValueError("a JSON record without a message")
    ts, res = None, None
    if isinstance(rec.get("asctime"), str) and (t := ASCTIME.match(rec["asctime"])):
        ts = datetime.fromisoformat(f"{t['ts']}.{t['ms']}").replace(tzinfo=tz).astimezone(UTC)
        res = 1
    return rec["message"], ts, res, str(rec.get("levelname") or "")


def _read(year: int | None) -> ReadLine:
    def parse_line(raw: bytes, node: str, file_id: int, lineno: int, tz: ZoneInfo, rows: EngineRows) -> bool:
        """One line of a vLLM log into `rows` (its engine_lines row, and the request and link rows it
        gives). False when the line is rejected (the reason is in rows.rejected)."""
        if b"\x00" in raw:
            rows.rejected.append((file_id, lineno, "binary data (NUL bytes) in a text log line"))
            return False
        text = _decode(raw)
        if "\x1b" in text:
            text = ANSI.sub("", text)
        ts: datetime | None = None
        res: int | None = None
        msg = text
        try:
            if text.startswith("{"):
                msg, ts, res, _ = _json_record(text, tz)
            elif m := PREFIX.search(text):
                msg = m["msg"]
                if year is not None:
                    ts, res = _local(f"{m['md']} {m['hms']}", year, tz), 1000
        except (ValueError, OverflowError, RecursionError) as err:
            rows.rejected.append((file_id, lineno, f"vLLM record with an unusable time or form ({err})"[:200]))
            return False
        base = {"node": node, "file_id": file_id, "line": lineno, "ts": ts}
        try:
            kind = parse_message(msg, base, rows)
        except (ValueError, KeyError, OverflowError, RecursionError) as err:
            rows.rejected.append((file_id, lineno, f"vLLM request line with unusable fields ({err}): {msg[:120]}"))
            return False
        if kind is None and any(lit in msg for lit in integrity.LITERALS):  # NIXL's, Mooncake's: with its time
            try:
                kind = integrity.parse_message(msg, base, rows)
            except ValueError as err:
                rows.rejected.append((file_id, lineno, f"integrity line with unusable fields ({err}): {msg[:120]}"))
                return False
        if kind is None and msg.startswith(READ_MARKERS):
            rows.rejected.append(
                (file_id, lineno, "looks like a vLLM request line, but its fields could not be parsed: " + msg[:120])
            )
            return False
        rows.lines.append(
            {"node": node, "file_id": file_id, "line": lineno, "ts": ts, "ts_resolution_ms": res, "rank": None,
             "kind": kind, "message": msg[:4000]}
        )  # fmt: skip
        return True

    return parse_line


@lru_cache(maxsize=64)
def dated(year: int | None) -> LineReader:
    """vLLM's line reader for logs of `year` (None: text lines' times unknown). Text and JSON records
    are told apart per line, so both of the entry's readers are the same function."""
    read = _read(year)
    return LineReader(read, read, READ_MARKERS)


READER = dated(None)
DATED: Callable[[int | None], LineReader] = dated

"""Watch, reading in bulk (issue #36): a chunk of new whole lines typed at once, not line by line.

The watcher reads only the lines that hold a watched literal (forensics.watch.detector.WATCHED_SHAPES),
and on a busy server nearly all of them are one line per finished request: the `Req Time Stats(...)`
line in text logs and the `request.finished` record of --log-requests JSON. A strict pattern finds
those in the whole chunk in C (re.finditer over the bytes, multiline) and a Python step only reads
their fields; every other line that holds a watched literal is parsed by the per-line reader of
forensics.engines.sglang.reader (READER), the reference, as before. So the lines
handed to the detector, their order and their numbers are the per-line path's.

As in forensics.ingest.bulk, a strict pattern takes a line only where the per-line parser would give
the same values for the fields the detector reads (ROW_KEYS, and the line's time resolution):
  text: the time_stats shape's bulk pattern (forensics.engines.sglang.shapes SHAPES, the same RE2 text
  compiled by Python's re: shapes.line_pattern) behind the record prefix or none; a rid of ASCII
  without NUL; room, lengths in int64; a time the zone can hold;
  JSON: `{"timestamp": .., "event": "request.finished", "rid": .., "obj": {..}, "out": {"meta_info": {..}}}`
  as SGLang's RequestLogger._log_json writes it (json.dumps: `, ` and `: `), strings of printable ASCII
  without quotes, escapes or brackets, values nested two deep at most; a non-empty rid; obj's
  bootstrap_room (at most once, int64 or null) and meta_info's prompt_tokens (once, an int64) and
  finish_reason (at most once; its text as json.loads reads it) on their object's own level.
Everything else goes to the per-line parser. Page events of the writer's layout are read the same way
(forensics.watch.pages.PAGE_LINE). tests/watch/test_chunks.py compares both readers' rows line by line
and the alerts of both paths on simulated, generated and real-line bundles.

KVF_WATCH_READER=python reads every candidate line with the per-line parser and every page event with
json.loads (the reference), as KVF_ENGINE_READER=python does for ingest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines.facts import EngineRows, ReadLine
from forensics.engines.sglang.reader import READER as LINES
from forensics.engines.sglang.reader import local_to_utc
from forensics.engines.sglang.rows import UTC
from forensics.engines.sglang.shapes import SHAPES, line_pattern

READER = os.environ.get("KVF_WATCH_READER", "bulk")

# the fields of a request row the detector reads (tests/watch/test_chunks.py checks that it reads no other)
ROW_KEYS = ("kind", "rid", "room", "ts", "input_len", "detail", "forward_s", "queue_s")
INT64 = 1 << 63

# a candidate line, as the detector takes it: (line number, the line's bytes with its newline, request
# rows, config rows, the record prefix's time resolution in ms or None)
Typed = tuple[int, bytes, list[dict[str, Any]], list[dict[str, Any]], int | None]

# --- text: the time_stats shape's bulk pattern behind the record prefix or none (shapes.line_pattern) ---
TIME_STATS_LINE = re.compile(line_pattern("time_stats"), re.M)
TEXT_HOT: tuple[bytes, ...] = tuple(lit.encode() for lit in SHAPES["time_stats"].literals)
# a duration of the tail, its first pair by that name (DURATION's setdefault): `name=12.34[ms]`, found by
# ` name=` (in the tail a space only follows a pair's `, ` or `: `)
FORWARD, QUEUE = b" forward_duration=", b" queue_duration="
_DURATION = re.compile(rb"([0-9]+(?:\.[0-9]+)?)(ms)?")

# --- JSON: a request.finished record ---
_S = rb'"[ !#-Z^-z|~]*+"'  # printable ASCII without " \ [ ] { }
_N = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?"
_SC = rb"(?:" + _S + rb"|" + _N + rb"|null|true|false)"
_L = rb"\[(?:" + _SC + rb"(?:, " + _SC + rb")*+)?\]"
_V1 = rb"(?:" + _SC + rb"|" + _L + rb")"
_D1 = rb"\{(?:" + _S + rb": " + _V1 + rb"(?:, " + _S + rb": " + _V1 + rb")*+)?\}"
_V = rb"(?:" + _SC + rb"|" + _L + rb"|" + _D1 + rb")"
_D = rb"\{(?:" + _S + rb": " + _V + rb"(?:, " + _S + rb": " + _V + rb")*+)?\}"
FINISHED_LINE = re.compile(
    rb'^\{"timestamp": "([ !#-Z^-z|~]*+)", "event": "request\.finished", "rid": "([ !#-Z^-z|~]++)", '
    rb'"obj": (' + _D + rb'), "out": \{"meta_info": (' + _D + rb")\}\}$",
    re.M,
)
JSON_HOT: tuple[bytes, ...] = (b'"request.finished"',)
# a value inside an object the pattern above admitted: a flat object, a list, a string or a scalar
_VALUE = re.compile(rb'\{[^{}]*\}|\[[^\[\]]*\]|"[^"]*"|[^,{}\[\]"]+')
_INT_OR_NULL = re.compile(rb"(?:(0|-?[1-9][0-9]*)|null)(?=[,}])")
ROOM_KEY, PROMPT_KEY, REASON_KEY = b'"bootstrap_room": ', b'"prompt_tokens": ', b'"finish_reason": '
_DETAILS: dict[bytes, str] = {}  # a finish_reason's text -> the detail the per-line parser writes


class _Times:
    """A text line's record time as local_to_utc gives it, each second of a chunk converted once."""

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self.seconds: dict[bytes, datetime] = {}

    def at(self, second: bytes, frac: bytes | None) -> datetime:
        base = self.seconds.get(second)
        if base is None:
            if len(self.seconds) > 4096:
                self.seconds.clear()
            base = self.seconds[second] = local_to_utc(second.decode(), None, self.tz)
        return base.replace(microsecond=int(frac[1:].ljust(6, b"0"))) if frac else base


def _int64(text: bytes) -> int | None:
    v = int(text)
    return v if -INT64 <= v < INT64 else None


def _key(data: bytes, key: bytes, lo: int, hi: int) -> int | None:
    """Where the value of `key` starts in the object data[lo:hi]: -1 when absent, None when it is there
    more than once or inside a nested object (left to the per-line parser)."""
    k = data.find(key, lo, hi)
    if k < 0:
        return -1
    if data.find(key, k + 1, hi) >= 0:
        return None
    if data.find(b"{", lo + 1, k) >= 0 and data.count(b"{", lo, k) - data.count(b"}", lo, k) != 1:
        return None  # strings hold no braces: the key is on the object's own level where every { before it closed
    return k + len(key)


def _int_at(data: bytes, pos: int) -> tuple[bool, int | None]:
    """(taken, value) of an int64 or null at pos."""
    m = _INT_OR_NULL.match(data, pos)
    if m is None:
        return False, None
    if m[1] is None:
        return True, None
    v = _int64(m[1])
    return v is not None, v


def _finished(m: re.Match[bytes], data: bytes, times: _Times) -> dict[str, Any] | None:
    """The detector's fields of a request.finished record (parse_request_line, _finished), or None."""
    room_at = _key(data, ROOM_KEY, m.start(3), m.end(3))
    if room_at is None:
        return None
    room = None
    if room_at >= 0:
        ok, room = _int_at(data, room_at)
        if not ok:
            return None
    lo, hi = m.start(4), m.end(4)
    pt_at, fr_at = _key(data, PROMPT_KEY, lo, hi), _key(data, REASON_KEY, lo, hi)
    if pt_at is None or pt_at < 0 or fr_at is None:
        return None
    ok, prompt = _int_at(data, pt_at)
    if not ok or prompt is None:
        return None
    detail = "null"
    if fr_at >= 0:
        v = _VALUE.match(data, fr_at)
        assert v is not None  # the line pattern admitted a value there
        frag = v[0]
        detail = _DETAILS.get(frag) or ""
        if not detail:
            detail = json.dumps(json.loads(frag), sort_keys=True)[:500]
            if len(_DETAILS) > 4096:
                _DETAILS.clear()
            _DETAILS[frag] = detail
    try:
        ts = datetime.fromisoformat(m[1].decode())
        ts = (ts.replace(tzinfo=times.tz) if ts.tzinfo is None else ts).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return {"kind": "finished", "rid": m[2].decode(), "room": room, "ts": ts, "input_len": prompt, "detail": detail}


def _seconds(data: bytes, name: bytes, lo: int, hi: int) -> float | None:
    i = data.find(name, lo, hi)
    if i < 0:
        return None
    m = _DURATION.match(data, i + len(name))
    assert m is not None  # the line pattern admitted a number there
    return float(m[1]) / (1000 if m[2] else 1)


def _time_stats(m: re.Match[bytes], data: bytes, times: _Times) -> dict[str, Any] | None:
    """The detector's fields of a Req Time Stats line (parse_text_line, _time_stats), or None."""
    second, frac, _, rid, room_t, inp_t, out_t, kind, _ = m.groups()
    if not rid.isascii() or b"\x00" in rid:
        return None
    inp = int(inp_t)
    if inp >= INT64 or int(out_t) >= INT64:
        return None
    room = None
    if room_t is not None and room_t != b"None":
        room = int(room_t)
        if not -INT64 <= room < INT64:
            return None
    ts = None
    if second is not None:
        try:
            ts = times.at(second, frac)
        except (ValueError, OverflowError):
            return None
    lo, hi = m.span(9)
    return {
        "kind": "time_stats", "rid": rid.decode().strip("'\""), "room": room, "ts": ts, "input_len": inp,
        "detail": kind.decode(), "forward_s": _seconds(data, FORWARD, lo, hi), "queue_s": _seconds(data, QUEUE, lo, hi),
    }  # fmt: skip


def _per_line(raw: bytes, lineno: int, jsonl: bool, tz: ZoneInfo, read: ReadLine | None = None) -> Typed | None:
    """One line through the per-line parser (SGLang's, or `read`: another engine's, forensics.watch.engines),
    as the detector takes it (None: rejected or no rows)."""
    rows = EngineRows()
    if not (read or (LINES.json if jsonl else LINES.text))(raw, "", 0, lineno, tz, rows):
        return None
    if not rows.requests and not rows.config:
        return None
    return lineno, raw, rows.requests, rows.config, rows.lines[0].get("ts_resolution_ms") if rows.lines else None


def per_line(
    data: bytes, before: int, marker: re.Pattern[bytes], jsonl: bool, tz: ZoneInfo, read: ReadLine | None = None
) -> Iterator[Typed]:
    """The reference: each line of the chunk that holds a watched literal, through the per-line parser
    (`read`: another engine's, whose lines have no bulk pattern here: its only reader)."""
    line, pos, last = before, 0, -1
    for m in marker.finditer(data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        if start <= last:
            continue  # a second literal on a line already taken
        line += data.count(b"\n", pos, start) + 1
        end = data.index(b"\n", m.start())
        pos, last = end + 1, start
        if (t := _per_line(data[start : end + 1], line, jsonl, tz, read)) is not None:
            yield t


def _others(data: bytes, strict: dict[int, re.Match[bytes]], lits: tuple[bytes, ...]) -> set[int]:
    """The starts of the lines that hold one of `lits` and that the strict pattern did not take."""
    starts: set[int] = set()
    for lit in lits:
        i = data.find(lit)
        while i >= 0:
            s = data.rfind(b"\n", 0, i) + 1
            if s not in strict:
                starts.add(s)
            i = data.find(lit, i + 1)
    return starts


def typed(data: bytes, before: int, jsonl: bool, tz: ZoneInfo, literals: tuple[bytes, ...]) -> Iterator[Typed]:
    """Each line of the chunk `data` (whole lines; `before` lines precede it in its file) that holds one of
    `literals`, in order, with the rows the detector reads: the hot shape's by its strict pattern, the
    rest by the per-line parser."""
    pattern, hot, fields = (FINISHED_LINE, JSON_HOT, _finished) if jsonl else (TIME_STATS_LINE, TEXT_HOT, _time_stats)
    times = _Times(tz)
    strict = list(pattern.finditer(data))
    rest = tuple(lit for lit in literals if lit not in hot and lit in data)
    # every strict line holds one of `hot`: as many of them as strict lines leaves none on another line
    stray = sum(data.count(h) for h in hot) != len(strict)
    if rest or stray:
        by_start = {m.start(): m for m in strict}
        starts = sorted({*by_start, *_others(data, by_start, rest + hot if stray else rest)})
        order = [(s, by_start.get(s)) for s in starts]
    else:
        order = [(m.start(), m) for m in strict]
    count = data.count
    line, pos = before, 0
    for start, m in order:
        line += count(b"\n", pos, start) + 1
        if m is not None:
            pos = m.end() + 1
            raw = data[start:pos]
            row = fields(m, data, times)
            if row is not None:
                yield line, raw, [row], [], None if jsonl or m[1] is None else 1 if m[2] else 1000
                continue
        else:
            pos = data.index(b"\n", start) + 1
            raw = data[start:pos]
        if (t := _per_line(raw, line, jsonl, tz)) is not None:
            yield t

"""Replay a bundle's engine logs into a folder over real time, as a live cluster would write them.

`replay(bundle, target, speed)` is what `forensics simulate OUT --live TARGET` runs after the
simulation: it lets `forensics watch TARGET` be tested end to end as a separate process.

What is written, and when:

- `target/bundle.toml` is copied first (the watcher reads the engine log zone from it).
- The engine logs of every node (`engine/<node>/server.log`, `engine/<node>/requests.jsonl`) and,
  with `pages=True`, the JSON-lines page events (`pages/<node>.jsonl`; Parquet page files are
  skipped) go to the same relative paths under `target`, byte for byte.
- A line's log time is its `[YYYY-MM-DD HH:MM:SS(.fff) ...]` prefix (server.log), its `timestamp`
  (requests.jsonl) or its `ts` (page events); naive times are in the bundle's `[engine]
  log_timezone`. A line without one takes its predecessor's (a file's first lines without one go at
  the start), and a line never goes before an earlier line of its own file (a file's order is kept:
  its due time is the running maximum of its lines' log times).
- The start-up lines at the head of each server.log (server_args, Load weight, KV Cache is
  allocated, max_total_num_tokens: logged before any traffic) are written at once, at the start.
  Every other line is written at `start + start_delay + (log_time - first_log_time) / speed`, in
  log-time order across all files (ties: by relative path, then line). speed=0: as fast as possible.
- Writing goes in ticks: the lines due within `TICK` (1 ms) of now are written together, each file's
  share of them in one `write` call of whole lines on an unbuffered O_APPEND descriptor (files in
  the order of their first line in the tick; at most `TICK_LINES` lines a tick). So the order across
  files holds to within a tick, and a line's `written_at` is the wall time when its whole tick was in
  the files. A reader never sees a part of a line, save that Linux may expose a write that crosses
  a 4 KiB page boundary one page at a time: a follower should still hold back an unterminated tail.
- rotate_every=N: once a server.log holds N lines, the next line first renames it to server.log.1
  (replacing an older .1, as logrotate's `rotate 1` without copytruncate) and opens a new server.log.
  Only server.log files rotate.

The truth record (`truth=FILE`, JSON lines, one per *deciding* server.log line written; start-up
lines, `Req Time Stats` of prefill and decode, `Decode transfer failed`, and the prefill's
`Input length ... exceeds` line; the other lines are not recorded):

    {"file": "engine/decode-0/server.log", "line": 17, "bundle_line": 1217, "kind": "decode_stats",
     "room": 5726577765675443453, "rid": "ba23...", "log_ts": "2026-08-29 10:00:30.327",
     "log_us": 1788000030327000, "written_at": 1767000000.123456}

`line` is the 1-based line number in the file the line went to (after a rotation: in the new
server.log), `bundle_line` its line number in the bundle's file, `kind` one of `startup`,
`prefill_stats`, `decode_stats`, `transfer_failed`, `over_length`; `room` and `rid` are null where the
line names none; `written_at` is the wall clock (epoch seconds, `time.time()`) just after the
line's tick was written; `log_us` is the line's log time in epoch µs and `log_ts` its stamp as
written. A leaking room's detection latency is then an alert's `detected_at` minus the `written_at` of its
`decode_stats` record. `on_line`, if given, is called for every written line (any file) with a
`Written` tuple, for in-process tests.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, NamedTuple
from zoneinfo import ZoneInfo

TICK = 0.001  # a line due within this many seconds is written now (no sleep shorter than that)
TICK_LINES = 4096  # at most this many lines written per tick (speed 0, or catching up)
STARTUP_MARKERS = (b"server_args=", b"Load weight", b"KV Cache is allocated", b"max_total_num_tokens=")
_TEXT_TS = re.compile(rb"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?[ \]]")
_JSON_TS = {  # the first key of the simulator's (and SGLang's) records: read without a JSON parse
    "requests": re.compile(rb'\{"timestamp": ?"([^"\\]+)"'),
    "pages": re.compile(rb'\{"node": ?"[^"\\]*", ?"seq": ?-?\d+, ?"ts": ?"([^"\\]+)"'),
}
_JSON_KEY = {"requests": "timestamp", "pages": "ts"}
_ROOM = re.compile(rb"bootstrap_room=(\d+)")
_RID = re.compile(rb"rid='?([0-9A-Za-z_-]+)")
_STARTUP = -1  # due time of start-up lines: before any log time (log times are positive epoch µs)


class Written(NamedTuple):
    """One written line, as given to `on_line`."""

    file: str  # relative path in target ("engine/decode-0/server.log")
    line: int  # 1-based line number in the file it went to (after rotation: the new file)
    bundle_line: int  # 1-based line number in the bundle's file
    log_us: int | None  # its log time, epoch µs (None: the line has none of its own)
    written_at: float  # wall clock, epoch seconds, just after the write
    data: bytes  # the line, with its newline


def _kind(data: bytes, startup: bool) -> str | None:
    if startup:
        return "startup"
    if b"Req Time Stats(" in data:
        return "decode_stats" if b"type=decode" in data else "prefill_stats"
    if b"Decode transfer failed" in data:
        return "transfer_failed"
    if b"Input length (" in data and b"exceeds" in data:
        return "over_length"
    return None


class _Clock:
    """Log time strings -> epoch µs, naive ones in the bundle's log zone (cached per second)."""

    def __init__(self, zone: str) -> None:
        try:
            self.tz = UTC if zone.upper() in ("UTC", "Z", "ETC/UTC") else ZoneInfo(zone)
        except (ValueError, KeyError) as err:  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"bundle.toml: unknown [engine] log_timezone {zone!r}") from err
        self.cache: dict[bytes, int] = {}  # second in the log zone -> epoch µs
        self.utc_cache: dict[bytes, int] = {}  # second in UTC -> epoch µs
        self.days: dict[bytes, int] = {}  # UTC date -> epoch s of its midnight

    def sec(self, s: bytes, utc: bool = False) -> int:
        """'YYYY-MM-DD HH:MM:SS' (or with a T) -> epoch µs; ValueError if it is not one."""
        cache = self.utc_cache if utc else self.cache
        v = cache.get(s)
        if v is None:
            if len(cache) > 65536:
                cache.clear()
            if utc or self.tz is UTC:  # midnight per day, then arithmetic
                day = self.days.get(s[:10])
                if day is None:
                    midnight = datetime.strptime(s[:10].decode(), "%Y-%m-%d").replace(tzinfo=UTC)
                    day = self.days[s[:10]] = int(midnight.timestamp())
                h, m, sec = int(s[11:13]), int(s[14:16]), int(s[17:19])
                if h > 23 or m > 59 or sec > 60 or s[13:14] != b":" or s[16:17] != b":":
                    raise ValueError(f"not a time: {s!r}")
                v = (day + h * 3600 + m * 60 + sec) * 1_000_000
            else:
                dt = datetime.strptime(s.decode().replace("T", " "), "%Y-%m-%d %H:%M:%S")
                v = int(dt.replace(tzinfo=self.tz).timestamp()) * 1_000_000
            cache[s] = v
        return v

    def text(self, sec: bytes, frac: bytes | None) -> int | None:
        try:
            return self.sec(sec) + (int(frac.ljust(6, b"0")) if frac else 0)
        except ValueError:  # digits in the shape of a time that is none (month 13)
            return None

    def iso(self, s: bytes) -> int | None:
        try:
            if len(s) >= 19 and s[10:11] in (b"T", b" "):
                tail = s[19:]
                utc = tail.endswith(b"Z")
                tail = tail[:-1] if utc else tail
                if not tail or (tail[:1] in (b".", b",") and tail[1:].isdigit()):
                    return self.sec(s[:19], utc) + (int(tail[1:7].ljust(6, b"0")) if tail else 0)
            dt = datetime.fromisoformat(s.decode().replace("Z", "+00:00"))  # an explicit offset, or another shape
        except (ValueError, UnicodeDecodeError):
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=self.tz)
        return int(round(dt.timestamp() * 1_000_000))


def _log_zone(bundle: Path) -> str:
    try:
        doc = tomllib.loads((bundle / "bundle.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return "UTC"
    engine = doc.get("engine")
    zone = engine.get("log_timezone", "UTC") if isinstance(engine, dict) else "UTC"
    return zone if isinstance(zone, str) and zone else "UTC"


def _sources(bundle: Path, pages: bool) -> list[tuple[str, Path, str]]:
    """(relative path, file, kind) of every file to replay, sorted by relative path."""
    out = []
    engine = bundle / "engine"
    for node in sorted(p for p in engine.iterdir() if p.is_dir()):
        for name, kind in (("server.log", "text"), ("requests.jsonl", "requests")):
            if (node / name).is_file():
                out.append((f"engine/{node.name}/{name}", node / name, kind))
    if pages and (bundle / "pages").is_dir():
        for f in sorted((bundle / "pages").glob("*.jsonl")):
            out.append((f"pages/{f.name}", f, "pages"))
    return sorted(out)


def _lines(
    fidx: int, path: Path, kind: str, clock: _Clock
) -> Iterator[tuple[int, int, int, bytes, int | None, bytes | None]]:
    """(due µs or _STARTUP, file index, bundle line, data, own log µs, raw stamp) in file order; due is
    monotone within the file."""
    due = _STARTUP
    head = kind == "text"
    fast = _JSON_TS.get(kind)
    with path.open("rb") as f:
        for n, data in enumerate(f, 1):
            own: int | None = None
            raw: bytes | None = None
            if kind == "text":
                m = _TEXT_TS.match(data)
                if m:
                    own = clock.text(m[1], m[2])
                    raw = data[1 : m.end() - 1] if own is not None else None
            else:
                m = fast.match(data) if fast else None
                if m:
                    raw = m[1]
                else:
                    try:
                        v = json.loads(data).get(_JSON_KEY[kind])
                    except (ValueError, AttributeError):
                        v = None
                    raw = v.encode() if isinstance(v, str) else None
                own = clock.iso(raw) if raw else None
            if head:
                if any(mk in data for mk in STARTUP_MARKERS):
                    yield _STARTUP, fidx, n, data, own, raw
                    continue
                head = False
            if own is not None and own > due:
                due = own
            yield due, fidx, n, data, own, raw


class _Out:
    """One target file: an unbuffered O_APPEND descriptor, its line count, its rotations."""

    def __init__(self, root: Path, rel: str, rotate_every: int | None) -> None:
        self.path = root / rel
        self.rel = rel
        self.rotate_every = rotate_every if rel.endswith("server.log") else None
        self.fd = -1
        self.n = 0  # lines in the current file
        self.total = 0
        self.rotations = 0
        self.text = rel.endswith("server.log")
        self.rel_json = json.dumps(rel)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _write(self, buf: bytes) -> None:
        k = os.write(self.fd, buf)
        if k < len(buf):  # a short write (a signal, a full disk): write the rest
            view = memoryview(buf)[k:]
            while view:
                view = view[os.write(self.fd, view) :]

    def write(self, lines: list[bytes]) -> int:
        """Write lines in one call per part between rotations (rotating first where due); returns the first
        line's 1-based number in its file (the next ones follow, restarting at 1 after a rotation)."""
        if self.fd < 0:
            self._open()
        first, i = 0, 0
        while i < len(lines):
            k = len(lines) - i
            if self.rotate_every is not None:
                if self.n >= self.rotate_every:
                    os.close(self.fd)
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                    self._open()
                    self.n, self.rotations = 0, self.rotations + 1
                k = min(k, self.rotate_every - self.n)
            self._write(lines[i] if k == 1 else b"".join(lines[i : i + k]))
            first = first or self.n + 1
            self.n += k
            self.total += k
            i += k
        return first

    def numbers(self, first: int, count: int) -> list[int]:
        """The line numbers of `count` lines written from line `first` on (rotations restart at 1)."""
        if self.rotate_every is None:
            return list(range(first, first + count))
        return [(first - 1 + j) % self.rotate_every + 1 for j in range(count)]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def check_target(target: Path) -> None:
    """ValueError if target already holds a replay (engine/, pages/ or bundle.toml): lines would be appended."""
    for p in (target / "engine", target / "pages", target / "bundle.toml"):
        if p.exists():
            raise ValueError(f"{target} already holds {p.name}: replay into an empty or new folder")


def replay(
    bundle: Path,
    target: Path,
    speed: float,
    start_delay: float = 0.5,
    rotate_every: int | None = None,
    pages: bool = False,
    on_line: Callable[[Written], None] | None = None,
    truth: Path | None = None,
) -> dict[str, object]:
    """Write the bundle's engine logs into target over real time (see the module doc); returns a summary:
    lines (written), files ({relative path: lines}), rotations ({server.log path: renames}),
    truth_records, started_at (epoch s, when the start-up lines went), first_log_us / last_log_us (of the
    timed lines), log_span_s, elapsed_s (wall, from started_at to the last write), max_lag_s (how late
    the latest-written line was against its schedule)."""
    bundle, target = Path(bundle), Path(target)
    if speed < 0:
        raise ValueError(f"speed must be 0 (as fast as possible) or positive, not {speed}")
    if rotate_every is not None and rotate_every < 1:
        raise ValueError(f"rotate_every must be at least 1, not {rotate_every}")
    if not (bundle / "engine").is_dir():
        raise ValueError(f"{bundle} has no engine/ folder: not a bundle")
    check_target(target)
    clock = _Clock(_log_zone(bundle))
    sources = _sources(bundle, pages)
    outs = [_Out(target, rel, rotate_every) for rel, _, _ in sources]
    merged = heapq.merge(*(_lines(i, p, k, clock) for i, (_, p, k) in enumerate(sources)))

    target.mkdir(parents=True, exist_ok=True)
    if (bundle / "bundle.toml").is_file():
        shutil.copyfile(bundle / "bundle.toml", target / "bundle.toml")
    tf: IO[str] | None = truth.open("w", encoding="utf-8") if truth is not None else None
    started_wall, started = time.time(), time.monotonic()
    traffic_at = started + start_delay
    first: int | None = None
    last = 0
    max_lag = 0.0
    n_truth = 0
    last_write = started_wall
    # the lines due now, per file (in the order the files first come): bundle line, data, own log µs, raw, startup
    tick: dict[int, list[tuple[int, bytes, int | None, bytes | None, bool]]] = {}
    tick_n = 0
    tick_when = 0.0

    def flush() -> None:
        nonlocal n_truth, last_write, max_lag
        firsts = [(fidx, outs[fidx].write([x[1] for x in items])) for fidx, items in tick.items()]  # (file, 1st no.)
        last_write = written = time.time()  # every line of the tick is in its file by now
        lag = time.monotonic() - tick_when
        if lag > max_lag and tick_when > started:
            max_lag = lag
        if on_line is None and tf is None:
            return
        for fidx, first_no in firsts:
            out, items = outs[fidx], tick[fidx]
            nums = out.numbers(first_no, len(items))
            if on_line is not None:
                for (bl, data, own, _raw, _startup), num in zip(items, nums, strict=True):
                    on_line(Written(out.rel, num, bl, own, written, data))
            if tf is None or not out.text:
                continue
            for (bl, data, own, raw, startup), num in zip(items, nums, strict=True):
                kind = _kind(data, startup)
                if kind is None:
                    continue
                room, rid = _ROOM.search(data), _RID.search(data)
                # JSON by hand: numbers, a JSON-quoted path and tokens the regexes limit to [0-9A-Za-z_ :.,-]
                rid_j = '"' + rid[1].decode() + '"' if rid else "null"
                ts_j = '"' + raw.decode() + '"' if raw else "null"
                tf.write(
                    f'{{"file": {out.rel_json}, "line": {num}, "bundle_line": {bl}, "kind": "{kind}", '
                    f'"room": {int(room[1]) if room else "null"}, "rid": {rid_j}, "log_ts": {ts_j}, '
                    f'"log_us": {"null" if own is None else own}, "written_at": {written:.6f}}}\n'
                )
                n_truth += 1

    try:
        now = time.monotonic()
        for due, fidx, bl, data, own, raw in merged:
            startup = due == _STARTUP
            if startup:
                when = started
            else:
                if first is None:
                    first = due
                last = due
                when = traffic_at + ((due - first) / 1e6 / speed if speed else 0.0)
            if when > now + TICK:
                now = time.monotonic()
                if when > now + TICK:  # nothing more is due: write what is pending, then wait
                    if tick:
                        flush()
                        tick, tick_n = {}, 0
                    if tf is not None:
                        tf.flush()
                    delay = when - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    now = time.monotonic()
            if tick_n >= TICK_LINES:
                flush()
                tick, tick_n = {}, 0
            if not tick:
                tick_when = when
            items = tick.get(fidx)
            if items is None:
                items = tick[fidx] = []
            items.append((bl, data, own, raw, startup))
            tick_n += 1
        if tick:
            flush()
    finally:
        for o in outs:
            o.close()
        if tf is not None:
            tf.close()
    files = {o.rel: o.total for o in outs}
    return {
        "target": str(target),
        "lines": sum(files.values()),
        "files": files,
        "rotations": {o.rel: o.rotations for o in outs if o.rotate_every is not None},
        "truth_records": n_truth,
        "started_at": started_wall,
        "first_log_us": first,
        "last_log_us": last if first is not None else None,
        "log_span_s": (last - first) / 1e6 if first is not None else 0.0,
        "elapsed_s": last_write - started_wall,
        "max_lag_s": max_lag,
    }

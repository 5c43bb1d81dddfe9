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
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, NamedTuple

from forensics.simulate.live_out import RotatingOut
from forensics.simulate.live_sources import STARTUP, Clock, lines, log_zone, sources

TICK = 0.001  # a line due within this many seconds is written now (no sleep shorter than that)
TICK_LINES = 4096  # at most this many lines written per tick (speed 0, or catching up)
_ROOM = re.compile(rb"bootstrap_room=(\d+)")
_RID = re.compile(rb"rid='?([0-9A-Za-z_-]+)")


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
    clock = Clock(log_zone(bundle))
    replayed = sources(bundle, pages)
    outs = [RotatingOut(target, rel, rotate_every) for rel, _, _ in replayed]
    merged = heapq.merge(*(lines(i, p, k, clock) for i, (_, p, k) in enumerate(replayed)))

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
            startup = due == STARTUP
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

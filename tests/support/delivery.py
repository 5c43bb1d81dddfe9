"""Seeded damage of a simulated bundle the way log shippers damage evidence.

- At-least-once delivery re-sends lines after a lost acknowledgement: Fluent Bit retries a chunk whole
  (docs.fluentbit.io, "Scheduling and Retries"), Vector's sinks retry a batch (vector.dev, "Delivery
  guarantees": at-least-once), Logstash's persistent queue replays unacknowledged events after a crash
  (elastic.co, "Persistent queues": at-least-once). The copies land next to the original or far later.
- Reordered batches: retried or parallel batches arrive out of order (Fluent Bit's `workers`, Vector's
  concurrent requests); a file assembled from them holds blocks of lines in another order.
- An outage: a shipper or node down drops an hour of one node's lines (the time range removed here).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

_TEXT_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+)")


def _read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return fh.read().splitlines(keepends=True)


def _write_lines(path: Path, lines: list[str]) -> None:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as fh:
        fh.write("".join(lines))


def duplicate(lines: list[str], rng: random.Random, share: float, keep_head: int = 0) -> list[str]:
    """A copy of `share` of the lines (after the first `keep_head`), each put right after its original or
    at a later random place (a re-sent chunk arrives later, never before what it repeats)."""
    out = list(lines)
    picks = rng.sample(range(keep_head, len(lines)), max(1, int(share * (len(lines) - keep_head))))
    for i in sorted(picks, reverse=True):
        at = i + 1 if rng.random() < 0.5 else rng.randint(i + 1, len(out))
        out.insert(at, lines[i])
    return out


def shuffle_blocks(lines: list[str], rng: random.Random, block: int = 20, keep_head: int = 0) -> list[str]:
    """The lines after the first `keep_head` cut into blocks of `block` lines, the blocks shuffled."""
    head, body = lines[:keep_head], lines[keep_head:]
    blocks = [body[i : i + block] for i in range(0, len(body), block)]
    rng.shuffle(blocks)
    return head + [line for b in blocks for line in b]


def _head(lines: list[str]) -> int:
    """The start-up lines before the first request line (a log's header, which stays first)."""
    for i, line in enumerate(lines):
        if "rid=" in line or '"rid"' in line:
            return i
    return len(lines)


def deliver_twice(bundle: Path, seed: int, share: float = 0.05) -> dict[str, int]:
    """Every engine log and every gateway JSON-lines or CSV file gets `share` of its lines again; returns
    the copies added per file (its path in the bundle)."""
    rng = random.Random(seed)
    added: dict[str, int] = {}
    for path in sorted(bundle.glob("engine/*/*")) + sorted(bundle.glob("gateway/*")):
        if path.suffix == ".parquet":
            continue
        lines = _read_lines(path)
        keep = 1 if path.suffix == ".csv" else _head(lines) if path.parts[-3] == "engine" else 0
        out = duplicate(lines, rng, share, keep_head=keep)
        added[path.relative_to(bundle).as_posix()] = len(out) - len(lines)
        _write_lines(path, out)
    return added


def reorder(bundle: Path, seed: int) -> None:
    """Blocks of lines shuffled within every engine log and gateway text file."""
    rng = random.Random(seed)
    for path in sorted(bundle.glob("engine/*/*")) + sorted(bundle.glob("gateway/*")):
        if path.suffix == ".parquet":
            continue
        lines = _read_lines(path)
        keep = 1 if path.suffix == ".csv" else _head(lines) if path.parts[-3] == "engine" else 0
        _write_lines(path, shuffle_blocks(lines, rng, keep_head=keep))


def reorder_pages(bundle: Path, seed: int) -> None:
    """Page files out of order: a Parquet file's rows in shuffled blocks (written as several row groups),
    a JSON-lines file's lines in shuffled blocks."""
    rng = random.Random(seed)
    for path in sorted(bundle.glob("pages/*")):
        if path.suffix == ".parquet":
            t = pq.read_table(path)
            n, size = t.num_rows, max(1, t.num_rows // 8)
            starts = list(range(0, n, size))
            rng.shuffle(starts)
            parts = [t.slice(s, size) for s in starts]
            pq.write_table(pa.concat_tables(parts), path, row_group_size=size)
        else:
            _write_lines(path, shuffle_blocks(_read_lines(path), rng))


def line_time(line: str) -> datetime | None:
    """The time a SGLang text or JSON log line states (naive, as written), or None."""
    m = _TEXT_TS.match(line)
    if m:
        return datetime.fromisoformat(m.group(1))
    if line.startswith("{"):
        ts = json.loads(line).get("timestamp")
        return datetime.fromisoformat(ts.rstrip("Z")).replace(tzinfo=None) if isinstance(ts, str) else None
    return None


def drop_engine_lines(bundle: Path, node: str, start: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """An outage: every line of `node`'s engine logs stamped in [start, end) removed; returns them with
    their times, in time order."""
    dropped: list[tuple[datetime, str]] = []
    for path in sorted((bundle / "engine" / node).glob("*")):
        kept = []
        for line in _read_lines(path):
            t = line_time(line)
            if t is not None and start <= t < end:
                dropped.append((t, line))
            else:
                kept.append(line)
        _write_lines(path, kept)
    return sorted(dropped)


def drop_page_events(bundle: Path, node: str, start: datetime, end: datetime) -> list[datetime]:
    """An outage of `node`'s page file: its events stamped in [start, end) removed; returns their times."""
    path = next(p for p in (bundle / "pages").glob(f"{node}.*"))
    if path.suffix == ".parquet":
        t = pq.read_table(path)
        ts = [_naive(x) for x in t.column("ts").to_pylist()]
        pq.write_table(t.filter(pa.array([not (start <= x < end) for x in ts])), path)
        return sorted(x for x in ts if start <= x < end)
    lines = _read_lines(path)
    ts = [_naive(json.loads(ln)["ts"]) for ln in lines]
    _write_lines(path, [ln for ln, x in zip(lines, ts, strict=True) if not (start <= x < end)])
    return sorted(x for x in ts if start <= x < end)


def _naive(x: object) -> datetime:
    if isinstance(x, datetime):
        return x.replace(tzinfo=None)
    if isinstance(x, (int, float)):
        return datetime.utcfromtimestamp(x / 1e9 if x > 1e15 else x)
    return datetime.fromisoformat(str(x).rstrip("Z")).replace(tzinfo=None)

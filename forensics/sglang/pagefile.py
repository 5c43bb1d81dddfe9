"""The page files' rows (docs/evidence-bundle.md section 4): the recorder's entries as columns, and the
columns as JSON lines or as an Arrow table of the page schema (forensics.sglang.recorder writes them)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

# seq of the first event, events in it, ts µs, op, room, start, end, peer, src: room, start and end are
# ints (one event) or arrays of the chunk's events (room may stay an int: every event of one room)
Entry = tuple[int, int, int, str, Any, Any, Any, str | None, str | None]


def iso_us(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_us() -> int:
    return time.time_ns() // 1000


def jsonl_text(node: str, cols: list[np.ndarray]) -> str:
    """The events of columns() as JSON lines, one per event (contract.page_columns)."""
    node_json = json.dumps(node)
    seq, ts, room, a, b = (cols[j].tolist() for j in (0, 1, 3, 4, 5))
    names = cols[8]
    op, peer, src = ([names[c] for c in cols[j].tolist()] for j in (2, 6, 7))
    iso = {t: iso_us(t) for t in set(ts)}
    lines = []
    for s, t, o, r, x, y, p, c in zip(seq, ts, op, room, a, b, peer, src, strict=True):
        tail = f', "peer": {json.dumps(p)}' if p is not None else ""
        tail += f', "src": "{c}"' if c is not None else ""
        lines.append(f'{{"node": {node_json}, "seq": {s}, "ts": "{iso[t]}", "op": "{o}", "room": {r}, '
                     f'"start": {x}, "end": {y}{tail}}}\n')  # fmt: skip
    return "".join(lines)


def parquet_table(node: str, cols: list[np.ndarray]) -> Any:
    """The events of columns() as an Arrow table of the page schema (contract.PAGE_SCHEMA)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from forensics.contract import PAGE_SCHEMA

    # whole columns: the strings (op, peer, src) taken from the chunk's few names by their codes, no
    # Python object per event (this thread shares the GIL with the scheduler)
    names = pa.array(cols[8].tolist(), pa.string())
    n = len(cols[0])
    arrays = [pa.repeat(pa.scalar(node, pa.string()), n), pa.array(cols[0], pa.int64()),
              pa.array(cols[1], pa.int64()).cast(pa.timestamp("us", tz="UTC")), pc.take(names, cols[2]),
              *(pa.array(cols[j], pa.int64()) for j in (3, 4, 5)), pc.take(names, cols[6]),
              pc.take(names, cols[7])]  # fmt: skip
    return pa.table(arrays, schema=PAGE_SCHEMA)


def columns(entries: list[Entry]) -> list[np.ndarray]:
    """The entries' events as columns (seq, ts, op, room, start, end, peer, src, names), in seq order
    (the transfer threads of a prefill node may append beside the scheduler): op, peer and src are
    int32 codes into `names` (an object array of the strings and None), one per entry repeated."""
    m = len(entries)
    counts = np.fromiter((e[1] for e in entries), np.int64, m)
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    seq = np.repeat(np.fromiter((e[0] for e in entries), np.int64, m) - offsets, counts) + np.arange(total)
    code: dict[Any, int] = {}  # op, peer and src values (str or None), in first-seen order

    def codes(j: int) -> np.ndarray:
        return np.repeat(np.fromiter((code.setdefault(e[j], len(code)) for e in entries), np.int32, m), counts)

    cols = [seq, np.repeat(np.fromiter((e[2] for e in entries), np.int64, m), counts), codes(3)]
    for j in (4, 5, 6):
        if total == m:  # one event per entry: ints, or arrays of one
            cols.append(np.fromiter((_one(e[j]) for e in entries), np.int64, m))
        else:
            cols.append(np.concatenate([_piece(e[j], e[1]) for e in entries]))
    cols += [codes(7), codes(8)]
    if total > 1 and (np.diff(seq) < 0).any():
        order = np.argsort(seq, kind="stable")
        cols = [c[order] for c in cols]
    names = np.empty(len(code), object)
    names[:] = list(code)
    return [*cols, names]


def spans(seqs: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive numbers in a rising list, as (first, last)."""
    out: list[tuple[int, int]] = []
    for x in seqs:
        if out and out[-1][1] == x - 1:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return out


def _one(v: Any) -> int:
    return int(v[0]) if isinstance(v, np.ndarray) else int(v)


def _piece(v: Any, n: int) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v.astype(np.int64, copy=False)
    return np.full(n, v, np.int64)

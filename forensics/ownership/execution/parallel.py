"""Per-node steps side by side in threads, with results in a fixed order.

The compiled walks (numba, nogil) and DuckDB's readers release the GIL, so on a machine with a few
cores two nodes' walks overlap in threads of one process, with no hand-over of tables between
processes. Each item gets a connection of its own (a cursor of the caller's, made in the caller's
thread); results come back in item order and the caller stores them in that order, so every table
is the same however many ran at once (tests/whole/test_determinism.py runs 1 and 2 threads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import duckdb

from forensics.db import cursor, thread_count

T = TypeVar("T")
R = TypeVar("R")

# most weight (transfers, say) of the items run at once beyond the first of a wave: each item's
# arrays take memory in proportion (about 100 bytes per transfer)
SIDE_BY_SIDE_WEIGHT = 20_000_000


def receivers(con: duckdb.DuckDBPyConnection, relation: str) -> tuple[list[str], list[int]]:
    """The receivers of `relation` (a table or view of transfers with a `receiver` column) in name
    order, and how many transfers each has: the items and weights of side_by_side."""
    counts = con.execute(f"SELECT receiver, count(*) FROM {relation} GROUP BY 1 ORDER BY 1").fetchall()
    return [node for node, _ in counts], [n for _, n in counts]


def waves(weights: Sequence[int], threads: int, bound: int = SIDE_BY_SIDE_WEIGHT) -> list[list[int]]:
    """Indices of the items (in order) grouped into waves run side by side: at most `threads` per
    wave and, beyond the first of a wave, at most `bound` weight in it."""
    out: list[list[int]] = []
    held = 0
    for i, w in enumerate(weights):
        if out and len(out[-1]) < threads and held + w <= bound:
            out[-1].append(i)
            held += w
        else:
            out.append([i])
            held = w
    return out


def side_by_side(
    con: duckdb.DuckDBPyConnection,
    items: Sequence[T],
    fn: Callable[[duckdb.DuckDBPyConnection, Any], R],
    prepare: Callable[[T], Any] | None = None,
    weights: Sequence[int] | None = None,
) -> Iterator[R]:
    """fn(cursor, prepare(item)) for every item, up to DuckDB's thread count at a time (bounded by
    `weights`, see waves), each call on a cursor of its own; results yielded in item order, a wave at
    a time, and not kept once handed over (store each and drop it before the next wave runs: memory then
    holds one wave). `prepare` runs in the caller's thread on `con` (it can read the caller's temp
    tables, which cursors do not see)."""
    threads = max(1, thread_count(con))
    for group in waves(weights if weights is not None else [0] * len(items), threads):
        inputs = [prepare(items[i]) if prepare else items[i] for i in group]
        cursors = [cursor(con) for _ in group]
        try:
            if len(group) == 1:
                results = [fn(cursors[0], inputs[0])]
            else:
                with ThreadPoolExecutor(max_workers=len(group)) as pool:
                    results = list(pool.map(fn, cursors, inputs))
        finally:
            for cur in cursors:
                cur.close()
        del inputs
        while results:  # handed over one by one: a wave's results are not held while the next one runs
            yield results.pop(0)

"""A node's events in their order, without sorting them when the evidence is already in order.

Instrumentation writes each node's page events in seq order, and page_events reads the Parquet files
where they lie, in file order. So a node's events usually arrive in seq order as stored, and sorting
hundreds of millions of rows (what ORDER BY costs, spilling to disk at 1B events) buys nothing. The
walks that need event order (the screen, landing seqs) therefore read the stored order
first and check it chunk by chunk; at the first key out of order they stop (OutOfOrder) and start
again on a sorted read. The answer is the same either way; only the time differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import cursor

T = TypeVar("T")
Chunk = list[np.ndarray]

# rows per chunk of a streamed read (a few int64 columns each): memory stays bounded however many
# events a node has; the walks carry their state from one chunk to the next
CHUNK_EVENTS = 8_000_000


class OutOfOrder(Exception):
    """The stored order broke: keys did not strictly rise."""


def chunks(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict, types: tuple, rows: int | None = None
) -> Iterator[Chunk]:
    """The query's rows, `rows` (default CHUNK_EVENTS) at a time, as one contiguous array per column (of
    the given dtypes)."""
    reading = cursor(con)  # its own cursor: the caller's connection stays free to store results
    try:
        reader = reading.sql(sql, params=params).to_arrow_reader(rows or CHUNK_EVENTS)
        for batch in reader:
            yield [_array(batch.column(i), t) for i, t in enumerate(types)]
    finally:
        reading.close()


def _array(col: pa.Array, dtype) -> np.ndarray:
    return np.ascontiguousarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


def rising(stream: Iterator[Chunk], key: int = 0) -> Iterator[Chunk]:
    """Pass the chunks on while column `key` strictly rises, within and across chunks; else OutOfOrder."""
    last = None
    for chunk in stream:
        k = chunk[key]
        if not k.size:
            continue
        if (last is not None and k[0] <= last) or not bool(np.all(k[1:] > k[:-1])):
            raise OutOfOrder
        last = k[-1]
        yield chunk


def alongside(stream: Iterator[Chunk], other: Chunk, key: int = 0) -> Iterator[tuple[Chunk, Chunk]]:
    """Pair a stream of chunks rising in `key` with the rows of `other` (columns of the same types,
    sorted by key, no key in common) that belong among them: each chunk comes with the rows of
    `other` up to its last key; the rest come last, with an empty chunk. Merging each pair by key
    (the walk does it as it goes) gives the sorted union, without copying either side."""
    ok = other[key]
    taken = 0
    for chunk in stream:
        upto = int(np.searchsorted(ok, chunk[key][-1], side="right")) if chunk[key].size else taken
        yield chunk, [c[taken:upto] for c in other]
        taken = max(taken, upto)
    if taken < ok.size:
        yield [c[:0] for c in other], [c[taken:] for c in other]


def in_order(
    walk: Callable[[Iterator[Chunk]], T], stored: Callable[[], Iterator[Chunk]], ordered: Callable[[], Iterator[Chunk]]
) -> tuple[T, bool]:
    """walk(stored()) if that stream stays in order (it raises OutOfOrder otherwise: see rising), else
    walk(ordered()) from scratch. Returns (the walk's result, whether the stored order served).
    `walk` must start afresh on each call."""
    try:
        return walk(stored()), True
    except OutOfOrder:
        return walk(ordered()), False

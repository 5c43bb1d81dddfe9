"""A node's events in their order, without sorting them when the evidence is already in order.

Instrumentation writes each node's page events in seq order, and page_events reads the Parquet files
where they lie, in file order. So a node's events usually arrive in seq order as stored, and sorting
hundreds of millions of rows (what ORDER BY costs, spilling to disk at 1B events) buys nothing. The
walks that need event order (forensics.screen, forensics.landing) therefore read the stored order
first and check it chunk by chunk; at the first key out of order they stop (OutOfOrder) and start
again on a sorted read. The answer is the same either way; only the time differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

T = TypeVar("T")
Chunk = list[np.ndarray]


class OutOfOrder(Exception):
    """The stored order broke: keys did not strictly rise."""


def chunks(con: duckdb.DuckDBPyConnection, sql: str, params: dict, types: tuple, rows: int) -> Iterator[Chunk]:
    """The query's rows, `rows` at a time, as one contiguous array per column (of the given dtypes)."""
    reading = con.cursor()  # its own cursor: the caller's connection stays free to store results
    try:
        reader = reading.sql(sql, params=params).to_arrow_reader(rows)
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


def merge(stream: Iterator[Chunk], other: Chunk, key: int = 0) -> Iterator[Chunk]:
    """Merge a stream of chunks rising in `key` with `other` (columns of the same types, sorted by key,
    no key in common): each chunk takes the rows of `other` up to its last key, the rest come last."""
    ok = other[key]
    taken = 0
    for chunk in stream:
        upto = int(np.searchsorted(ok, chunk[key][-1], side="right")) if chunk[key].size else taken
        if upto > taken:
            chunk = _interleave(chunk, [c[taken:upto] for c in other], key)
            taken = upto
        yield chunk
    if taken < ok.size:
        yield [c[taken:] for c in other]


def _interleave(a: Chunk, b: Chunk, key: int) -> Chunk:
    n = a[key].size + b[key].size
    at_b = np.searchsorted(a[key], b[key]) + np.arange(b[key].size)  # where b's rows go (rising)
    out = []
    for ca, cb in zip(a, b, strict=True):
        c = np.empty(n, dtype=ca.dtype)
        _fill(c, ca, cb, at_b)
        out.append(c)
    return out


@njit(cache=True, nogil=True)
def _fill(out: np.ndarray, a: np.ndarray, b: np.ndarray, at_b: np.ndarray) -> None:  # pragma: no cover
    """out[at_b] = b and the other positions of out = a, in order (one pass; masks cost five)."""
    j = 0
    ia = 0
    nb = at_b.size
    for i in range(out.size):
        if j < nb and at_b[j] == i:
            out[i] = b[j]
            j += 1
        else:
            out[i] = a[ia]
            ia += 1


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

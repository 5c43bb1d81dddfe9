"""The realistic generator's page-event files: one Parquet file per node, its row groups built and
written by a thread of their own while the compiled loop goes on."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contract import PAGE_SCHEMA
from forensics.simulate.pages.common import OPS, T0_US, WRITE

DICT = pa.dictionary(pa.int8(), pa.string())
# PAGE_SCHEMA with its text columns handed over dictionary-encoded (as Parquet stores them anyway); the
# files keep no Arrow schema, so every reader sees PAGE_SCHEMA's plain strings
PAGE_WRITE_SCHEMA = pa.schema([pa.field(f.name, DICT) if f.type == pa.string() else f for f in PAGE_SCHEMA])
WRITE_OPTIONS = {"use_dictionary": ["node", "op", "peer", "src"], "compression": "snappy", "store_schema": False}


def _codes(codes: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
    """int8 codes (-1: null) -> a dictionary array, without strings per row."""
    mask = codes < 0
    idx = pa.array(np.where(mask, 0, codes).astype(np.int8), mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(idx, values)


def _ints(arr: np.ndarray, typ: pa.DataType = pa.int64()) -> pa.Array:
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    return pa.Array.from_buffers(typ, len(arr), [None, pa.py_buffer(arr)])


class PageFiles:
    """Page-event writers, one file per node; row groups are built and written by a thread of their own
    while the compiled loop (which releases the GIL) goes on."""

    def __init__(self, pages: Path, names: list[str], roles: list[str], skews: np.ndarray, dark: int) -> None:
        self.names, self.roles, self.skews, self.dark = names, roles, skews, dark
        self.writers = {
            j: pq.ParquetWriter(pages / f"{n}.parquet", PAGE_WRITE_SCHEMA, **WRITE_OPTIONS)
            for j, n in enumerate(names)
            if j != dark
        }
        self.seq = np.zeros(len(names), np.int64)
        self.ops = pa.array(OPS)
        self.peers = pa.array([n for n, r in zip(names, roles, strict=True) if r == "decode"])
        self.queue: queue.Queue[tuple[int, np.ndarray, np.ndarray] | None] = queue.Queue(maxsize=3)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self._write(*item)
                except BaseException as e:  # handed to the caller at its next submit or close
                    self.error = e

    def submit(self, j: int, B: np.ndarray, B8: np.ndarray, m: int) -> None:
        if self.error is not None:
            raise self.error
        if m:
            self.queue.put((j, B[j, :, :m].copy(), B8[j, :, :m].copy()))

    def _write(self, j: int, B: np.ndarray, B8: np.ndarray) -> None:
        m = B.shape[1]
        op = B8[0]
        src = np.where(op == WRITE, 0, -1).astype(np.int8)
        seq = self.seq[j] + 1 + np.arange(m, dtype=np.int64)
        self.seq[j] += m
        table = pa.Table.from_arrays(
            [
                _codes(np.zeros(m, np.int8), pa.array([self.names[j]])),
                _ints(seq),
                _ints(B[0] + (self.skews[j] + T0_US), pa.timestamp("us", tz="UTC")),
                _codes(op, self.ops),
                _ints(B[1]),
                _ints(B[2]),
                _ints(B[3]),
                _codes(B8[1], self.peers),
                _codes(src, pa.array([self.roles[j]])),
            ],
            schema=PAGE_WRITE_SCHEMA,
        )
        self.writers[j].write_table(table, row_group_size=m)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        for w in self.writers.values():
            w.close()
        if self.error is not None:
            raise self.error

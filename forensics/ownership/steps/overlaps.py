"""Ownership steps, overlaps: allocations of slots another room still held (alloc_overlaps) and the
holdings each anomalous write hit (inj_pairs), by a sweep over the node's events
(forensics.ownership.kernels.sweep) instead of a join on time alone, whose output grew with the
square of the rooms in flight.

Reads: room_state, holdings, anomalous_writes. Writes: alloc_overlaps, inj_pairs (temp).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.sweep import hits

HOLDINGS = "SELECT node AS h_node, room AS h_room, seg_start AS h_start, seg_end AS h_end, kg_a, kg_f FROM holdings"


def _int64(t: pa.Table, name: str) -> np.ndarray:
    return frozen(t[name].to_numpy(zero_copy_only=False))  # one array type: one compile of hits


def _hit(con: duckdb.DuckDBPyConnection, name: str, queries: pa.Table, q_cols: list[str], h_cols: list[str]) -> None:
    """Table `name`: q_cols of each query (kg, seg_start, seg_end) beside h_cols of each holding it hit."""
    held = con.sql(HOLDINGS).to_arrow_table()
    qi, hi = hits(
        _int64(queries, "kg"), _int64(queries, "seg_start"), _int64(queries, "seg_end"),
        _int64(held, "kg_a"), _int64(held, "kg_f"), _int64(held, "h_start"), _int64(held, "h_end"),
    )  # fmt: skip
    out = pa.table({**{c: queries[c].take(qi) for c in q_cols}, **{c: held[c].take(hi) for c in h_cols}})
    with arrow_view(con, "hits_out", out):
        con.execute(f"CREATE OR REPLACE {'TEMP ' if name == 'inj_pairs' else ''}TABLE {name} AS SELECT * FROM hits_out")


def alloc_overlaps(con: duckdb.DuckDBPyConnection) -> None:
    """alloc_overlaps (node, room, x_start, x_end, h_node, h_room, h_start, h_end): every allocation and
    each holding of slots it overlaps that was alive then (double allocation)."""
    allocs = con.sql("""SELECT node, room, seg_start, seg_end, kg, seg_start AS x_start, seg_end AS x_end
        FROM room_state WHERE op = 'alloc'""").to_arrow_table()
    _hit(con, "alloc_overlaps", allocs, ["node", "room", "x_start", "x_end"], ["h_node", "h_room", "h_start", "h_end"])


def inj_pairs(con: duckdb.DuckDBPyConnection) -> None:
    """inj_pairs: each anomalous write beside every holding of slots it overlaps alive then (the
    holder's room_injected rows, room_injected.sql)."""
    writes = con.sql("""SELECT node, room, k, kg, pos, seg_start, seg_end, ambiguous, ts, ts_hi, op
        FROM anomalous_writes""").to_arrow_table()
    cols = ["node", "room", "k", "kg", "pos", "seg_start", "seg_end", "ambiguous", "ts", "ts_hi", "op"]
    _hit(con, "inj_pairs", writes, cols, ["h_node", "h_room", "h_start", "h_end"])
    con.execute("ALTER TABLE inj_pairs RENAME COLUMN h_room TO holder")

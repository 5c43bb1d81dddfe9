"""Pairs of transfers into overlapping slots of one receiver whose landing order the evidence does not prove.

Two transfers X and Y into one receiver are ordered only when one of these holds (spec section 4):
- they come from the same sender: its seq order is their landing order;
- X's landing window on the receiver's clock (land_lo, land_hi) ends before Y's begins;
- X's receiver seq window (seq_lo, seq_hi) ends before Y's begins: X landed before event seq_hi and
  Y after event seq_lo.
Anything else, in particular an order of the senders' own stamps, proves nothing: sender clocks
differ by up to seconds. Where the slots of an unordered pair overlap, every slot of the overlap has
two possible last writers; the findings (findings/queries/conflict_reads/) make each reader of it
indeterminate and name the other transfer's room as a possible source.

The timeline places transfers in the order (seq_lo, land_lo, sender, xseq) (ownership/queries/
timeline/: pos from seq_lo, then the sub rank). That order is a linear extension of the proven
orders above whenever a sender's stamps rise with its seq; a pair for which it is not (a proven
order the timeline contradicts) is reported here as unordered too, so the findings never rely on it.

The detector walks each receiver's transfers in that order, keeping the transfers whose seq window is
still open (seq_hi above the current seq_lo: not proven earlier by the seq rule); each new transfer
is compared with those only. Windows are a few receiver events wide when clock bounds are tight, so
the open set stays small; it is carried over between chunks of the stream, so memory stays bounded.
Reads: transfer_landing. Writes: transfer_conflicts; sets transfer_landing.conflict.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view
from forensics.ownership.execution.parallel import receivers, side_by_side
from forensics.ownership.execution.streams import chunks
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.conflict_walk import FIELDS, OUT_FIELDS, conflict_walk
from forensics.paths import load_query

CHUNK_TRANSFERS = 4_000_000  # transfers per chunk of a receiver's stream

_TYPES = (np.int64,) * FIELDS


def receiver_conflicts(batches, open_rows: int = 1024, out_rows: int = 4096) -> np.ndarray:
    """The unordered overlapping pairs of one receiver's transfers streamed in timeline order (chunks
    of FIELDS arrays), as rows of OUT_FIELDS int64: earlier sender code, xseq, room; later sender code,
    xseq, room; overlap start, end. The open set and the output grow as needed."""
    open_ = np.zeros((open_rows, FIELDS), dtype=np.int64)
    n_open = 0
    found: list[np.ndarray] = []
    out = np.zeros((out_rows, OUT_FIELDS), dtype=np.int64)
    for cols in batches:
        cols = tuple(frozen(c) for c in cols)
        j = 0
        while j < cols[0].size:
            j, n_open, n_out = conflict_walk(cols, j, open_, n_open, out)
            if n_out:
                found.append(out[:n_out].copy())
            if j < cols[0].size:  # stopped early: make room
                if n_open == open_.shape[0]:
                    open_ = np.concatenate([open_, np.zeros_like(open_)])
                if n_open >= out.shape[0] // 2:
                    out = np.zeros((2 * out.shape[0], OUT_FIELDS), dtype=np.int64)
    return np.concatenate(found) if found else np.zeros((0, OUT_FIELDS), dtype=np.int64)


SCHEMA = pa.schema(
    [
        ("receiver", pa.string()),
        ("a_sender", pa.string()),
        ("a_xseq", pa.int64()),
        ("a_room", pa.int64()),
        ("b_sender", pa.string()),
        ("b_xseq", pa.int64()),
        ("b_room", pa.int64()),
        ("ov_start", pa.int64()),
        ("ov_end", pa.int64()),
    ]
)


def transfer_conflicts(con: duckdb.DuckDBPyConnection) -> None:
    """Create transfer_conflicts (one row per unordered pair and its slot overlap; `a` comes first in the
    timeline) and mark both transfers of every pair `conflict` in transfer_landing."""
    nodes, weights = receivers(con, "transfer_landing")

    def prepare(node: str) -> tuple[str, list[str]]:
        senders = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT sender FROM transfer_landing WHERE receiver = ? ORDER BY 1", [node]
            ).fetchall()
        ]
        return node, senders

    def pairs(cur: duckdb.DuckDBPyConnection, job: tuple[str, list[str]]) -> pa.Table:
        node, senders = job
        query, params = load_query("ownership", "conflict_stream"), {"node": node, "senders": senders}
        stream = chunks(cur, query, params, _TYPES, CHUNK_TRANSFERS)
        rows = receiver_conflicts(stream)
        name = np.array(senders + [""], dtype=object)  # list_position counts from 1
        return pa.table(
            {
                "receiver": pa.array([node] * len(rows), pa.string()),
                "a_sender": pa.array(name[rows[:, 0] - 1], pa.string()),
                "a_xseq": rows[:, 1],
                "a_room": rows[:, 2],
                "b_sender": pa.array(name[rows[:, 3] - 1], pa.string()),
                "b_xseq": rows[:, 4],
                "b_room": rows[:, 5],
                "ov_start": rows[:, 6],
                "ov_end": rows[:, 7],
            },
            schema=SCHEMA,
        )

    parts = list(side_by_side(con, nodes, pairs, prepare=prepare, weights=weights))
    table = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    with arrow_view(con, "transfer_conflicts_out", table):
        con.execute("""CREATE OR REPLACE TABLE transfer_conflicts AS
            SELECT * FROM transfer_conflicts_out ORDER BY receiver, a_sender, a_xseq, b_sender, b_xseq, ov_start""")
    if len(table):
        con.execute("""UPDATE transfer_landing SET conflict = true
            WHERE (sender, xseq) IN (SELECT a_sender, a_xseq FROM transfer_conflicts
                                     UNION SELECT b_sender, b_xseq FROM transfer_conflicts)""")

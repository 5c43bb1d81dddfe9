"""Per-node seq checks without a hash aggregate or a window over every event: each node's seq column
is fetched once (in storage order, which is seq order when the files were written as instrumentation
writes them) and checked in one compiled pass; only when it is out of order is it sorted (a stable sort, fast on
nearly sorted input).

- any_duplicate_seq: does any node log one seq twice? Only then does the exact SQL that names every
  duplicate and the row it repeats (ingest/queries/page_events_dedupe.sql) need to run. It keeps the
  jumps it saw in passing (temp table seq_jumps_ingest, this module's scratch).
- store_seq_jumps: the temp table seq_jumps (node, prev_seq, next_seq), every jump in a node's seq
  among the final page_events: what ingest hands the ownership stage's seq_gaps. When ingest removed no
  event after the duplicate check (no duplicate, no slots beyond the pool, no replay window), the seqs
  are the same and the jumps it kept are taken as they are: one read of every seq, not two.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

from forensics.db import arrow_view, scalar


# compiled here, not in ownership/kernels/: ingest lies below ownership and may not import it
@njit(cache=True)
def _scan(seq: np.ndarray) -> tuple[bool, bool, np.ndarray]:  # pragma: no cover
    """One pass: (strictly rising, some seq repeats its predecessor, positions i where
    seq[i + 1] - seq[i] > 1). The last two mean what they say only on sorted seqs."""
    rising = True
    repeat = False
    at = []
    for i in range(seq.size - 1):
        d = seq[i + 1] - seq[i]
        if d <= 0:
            rising = False
            repeat = repeat or d == 0
        elif d > 1:
            at.append(i)
    return rising, repeat, np.array(at, dtype=np.int64)


def _node_seqs(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[str, np.ndarray, bool, np.ndarray]]:
    """Per node: its seqs sorted, whether one repeats, and where they jump (see _scan)."""
    nodes = [r[0] for r in con.execute("SELECT DISTINCT node FROM page_events ORDER BY node").fetchall()]
    for node in nodes:
        seq = con.execute("SELECT seq FROM page_events WHERE node = ?", [node]).fetchnumpy()["seq"]
        seq = np.ascontiguousarray(seq, dtype=np.int64)
        rising, repeat, at = _scan(seq)
        if not rising:
            seq = np.sort(seq, kind="stable")
            _, repeat, at = _scan(seq)
        yield node, seq, repeat, at


SCHEMA = pa.schema([("node", pa.string()), ("prev_seq", pa.int64()), ("next_seq", pa.int64())])


def _jumps(node: str, seq: np.ndarray, at: np.ndarray) -> pa.Table:
    return pa.table(
        {"node": pa.array([node] * at.size, type=pa.string()), "prev_seq": seq[at], "next_seq": seq[at + 1]}
    )


def _store(con: duckdb.DuckDBPyConnection, table: str, parts: list[pa.Table]) -> None:
    jumps = pa.concat_tables([t.cast(SCHEMA) for t in parts]) if parts else SCHEMA.empty_table()
    with arrow_view(con, "seq_jumps_out", jumps):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM seq_jumps_out")


def any_duplicate_seq(con: duckdb.DuckDBPyConnection) -> bool:
    parts = []
    for node, seq, repeat, at in _node_seqs(con):
        if repeat:
            return True
        parts.append(_jumps(node, seq, at))
    _store(con, "seq_jumps_ingest", parts)
    return False


def _exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]))


def store_seq_jumps(con: duckdb.DuckDBPyConnection, unchanged: bool) -> None:
    """Create temp table seq_jumps (node, prev_seq, next_seq): consecutive seqs of a node's final page
    events more than 1 apart. The jumps any_duplicate_seq saw stand for them if no event was removed
    since (`unchanged`); else the seqs are read again."""
    if unchanged and _exists(con, "seq_jumps_ingest"):
        con.execute("ALTER TABLE seq_jumps_ingest RENAME TO seq_jumps")
        return
    con.execute("DROP TABLE IF EXISTS seq_jumps_ingest")
    _store(con, "seq_jumps", [_jumps(node, seq, at) for node, seq, _, at in _node_seqs(con)])

"""Per-node seq checks without a hash aggregate or a window over every event: each node's seq column
is fetched once (in storage order, which is seq order when the files were written as instrumentation
writes them) and checked in numpy; only when it is out of order is it sorted (a stable sort, fast on
nearly sorted input).

- any_duplicate_seq: does any node log one seq twice? Only then does the exact SQL that names every
  duplicate and the row it repeats (queries/ingest/page_events_dedupe.sql) need to run.
- seq_jumps: the (node, prev_seq, next_seq) of every jump in a node's seq, for seq_gaps.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa


def _node_seqs(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[str, np.ndarray]]:
    nodes = [r[0] for r in con.execute("SELECT DISTINCT node FROM page_events ORDER BY node").fetchall()]
    for node in nodes:
        seq = con.execute("SELECT seq FROM page_events WHERE node = ?", [node]).fetchnumpy()["seq"]
        seq = np.ascontiguousarray(seq, dtype=np.int64)
        if seq.size > 1 and not bool(np.all(seq[1:] > seq[:-1])):
            seq = np.sort(seq, kind="stable")
        yield node, seq


def any_duplicate_seq(con: duckdb.DuckDBPyConnection) -> bool:
    return any(seq.size > 1 and bool(np.any(seq[1:] == seq[:-1])) for _, seq in _node_seqs(con))


def seq_jumps(con: duckdb.DuckDBPyConnection) -> None:
    """Create temp table seq_jumps (node, prev_seq, next_seq): consecutive seqs more than 1 apart."""
    parts = []
    for node, seq in _node_seqs(con):
        at = np.flatnonzero(seq[1:] - seq[:-1] > 1)
        if at.size:
            parts.append(pa.table({"node": pa.array([node] * at.size), "prev_seq": seq[at], "next_seq": seq[at + 1]}))
    schema = pa.schema([("node", pa.string()), ("prev_seq", pa.int64()), ("next_seq", pa.int64())])
    jumps = pa.concat_tables([t.cast(schema) for t in parts]) if parts else schema.empty_table()
    con.register("seq_jumps_out", jumps)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE seq_jumps AS SELECT * FROM seq_jumps_out")
    finally:
        con.unregister("seq_jumps_out")

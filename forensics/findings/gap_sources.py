"""Findings stage, the possible sources of a seq gap on a node with page telemetry (spec section 7: every
indeterminate response gets possible sources, a superset by construction).

A response that read slots whose last write is unknown since a lost block of events (or whose own
events were lost in it, or all of them: missing_rooms) attended whatever those slots held: KV written
before the gap and not provably overwritten by then, or KV written by the lost events themselves. Per
gap, gap_sources (node, gap_seq, room, holder, in_flight) lists both, once (not per response):
  - holder: the room of the last write of some slot before the gap: the upper envelope of the node's
    writes and landed transfers before it over the whole pool (forensics.ownership.kernels.envelope),
    with every room whose landing the clock bounds cannot order (ambiguous or conflicting) kept
    whatever the envelope says;
  - in_flight: a room whose lost events may have written: its page events do not prove it done before
    the gap (its last event a free before it) or begun after it (its first event an alloc after it);
    and every request the gateway sent to the node that has no page events there (missing_rooms).
The pairs (findings/queries/possible_sources/03_possible_extra.sql) are each affected recipient of the
gap times its sources: the rooms in flight around one gap and the pool's holders, never every room
with every room.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, run_query
from forensics.ownership.kernels.envelope import envelope


def _holders(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """(gap item, room) of the last writes before each lost gap, over the node's whole pool."""
    gaps = con.execute("""SELECT row_number() OVER (ORDER BY g.node, g.prev_seq) - 1 AS item, g.node, g.prev_seq,
            coalesce(t.own_max_end, 0) AS pool_end
        FROM seq_gaps g JOIN telemetry_nodes t USING (node) WHERE g.kind = 'lost' ORDER BY item""").fetchnumpy()
    if not len(gaps["item"]):
        return pa.table({"item": np.empty(0, dtype=np.int64), "room": np.empty(0, dtype=np.int64)})
    # the writes before each gap on its node: own writes at their seq, landed transfers just after the
    # receiver event before them (no receiver event on their slots lies in their window unless ambiguous)
    c = con.execute("""WITH gaps AS (
            SELECT row_number() OVER (ORDER BY node, prev_seq) - 1 AS item, node, prev_seq
            FROM seq_gaps WHERE kind = 'lost'
        ), writes AS (
            SELECT node, room, start, "end", 2 * seq AS pos FROM page_events WHERE op = 'write'
            UNION ALL
            SELECT receiver, room, start, "end", 2 * seq_lo + 1 FROM transfer_landing WHERE seq_lo IS NOT NULL
        )
        SELECT g.item, w.room, w.start, w."end", w.pos FROM gaps g JOIN writes w ON w.node = g.node
        WHERE w.pos < 2 * g.prev_seq + 1 AND w."end" > w.start
        ORDER BY g.item, w.pos, w.room, w.start""").fetchnumpy()
    item = np.asarray(c["item"], dtype=np.int64)
    pool_end = np.asarray(gaps["pool_end"], dtype=np.int64)
    end = np.asarray(c["end"], dtype=np.int64)
    top = np.zeros(len(pool_end), dtype=np.int64)
    if len(item):
        np.maximum.at(top, item, end)
    top = np.maximum(top, pool_end)
    k = np.arange(len(item), dtype=np.int64)  # the rows are in write order per gap: the rank is the key
    env = envelope(
        np.asarray(gaps["item"], dtype=np.int64),
        np.zeros(len(top), dtype=np.int64),
        np.maximum(top, 1),
        item,
        np.asarray(c["start"], dtype=np.int64),
        end,
        k,
    )
    found = env.k[env.k >= 0]
    room = np.asarray(c["room"], dtype=np.int64)
    return pa.table({"item": env.item[env.k >= 0].astype(np.int64), "room": room[found]})


def gap_sources(con: duckdb.DuckDBPyConnection) -> None:
    """gap_sources (node, gap_seq, room, holder, in_flight): per lost gap of a node with page telemetry,
    every room whose KV a response reading after it could have attended (the module's rule)."""
    with arrow_view(con, "gap_holders", _holders(con)):
        run_query(con, "findings", "gap_sources")

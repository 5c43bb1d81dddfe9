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
from forensics.paths import load_query


def _holders(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """(gap item, room) of the last writes before each lost gap, over the node's whole pool."""
    gaps = con.execute(load_query("findings", "gap_items")).fetchnumpy()
    if not len(gaps["item"]):
        return pa.table({"item": np.empty(0, dtype=np.int64), "room": np.empty(0, dtype=np.int64)})
    c = con.execute(load_query("findings", "gap_writes")).fetchnumpy()
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

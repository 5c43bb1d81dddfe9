"""Ownership stage: rebuild, per node, who held each KV slot range when and whose data it held.

Transfers, logged by the sender on its own clock, are placed on the receiver's event order using the
clock-offset bounds that ordinary transfers imply. Slot ranges stay ranges, and the work stays local:
 1. each room's own history is replayed on its own range boundaries (room_state);
 2. writes into slots the writer does not hold (late transfers) are matched to the holdings they hit
    and injected into those rooms' histories, which are replayed again;
 3. reads whose content predates their allocation (placeholders, shares) look up the last writer in
    the node's recent writes, widening the window only for what is still unexplained.
Reads: page_events. Writes: telemetry_nodes, seq_gaps, transfer_links, clock_bounds, transfer_landing,
timeline, node_index, room_state, holdings, alloc_overlaps, anomalous_writes, room_injected, history_writes,
history_items, history_found, history_open.
"""

from __future__ import annotations

import duckdb

from forensics.db import run_query, scalar

PLACEMENT = ("telemetry_nodes", "seq_gaps", "node_index", "transfer_bounds", "transfer_landing", "timeline")
# History windows, in writes before the read: most reads resolve in the first; 0 means all.
HISTORY_WINDOWS = (256, 4096, 32768, 0)


def rebuild_ownership(con: duckdb.DuckDBPyConnection) -> None:
    for step in PLACEMENT:
        run_query(con, "ownership", step)
    run_query(con, "ownership", "room_injected_empty")
    run_query(con, "ownership", "room_local", holders_only=False)
    con.execute("DROP TABLE IF EXISTS room_state")
    con.execute("ALTER TABLE room_state_new RENAME TO room_state")
    for step in ("holdings", "alloc_overlaps", "anomalous_writes", "room_injected"):
        run_query(con, "ownership", step)
    # second pass: only the rooms that foreign writes hit, replayed with those writes
    run_query(con, "ownership", "room_local", holders_only=True)
    con.execute("DELETE FROM room_state WHERE (node, room) IN (SELECT node, holder FROM room_injected)")
    con.execute("INSERT INTO room_state SELECT * FROM room_state_new")
    con.execute("DROP TABLE room_state_new")
    run_query(con, "ownership", "history_items")
    for window in HISTORY_WINDOWS:
        if scalar(con, "SELECT count(*) FROM history_open") == 0:
            break
        run_query(con, "ownership", "history_round", hw=window)

"""The ownership stage's steps, in order: PLACEMENT (needs every node) and NODE (one node's work).

A name runs ownership/queries/<name>.sql; a function runs Python over DuckDB tables, with the
compiled kernels of forensics.ownership.kernels doing the per-event work.
"""

from __future__ import annotations

import duckdb

from forensics.db import run_query, scalar, timed
from forensics.ownership.execution.tasks import NodeStage
from forensics.ownership.steps.conflicts import transfer_conflicts
from forensics.ownership.steps.history import HISTORY_WINDOWS, history_round
from forensics.ownership.steps.landing import landing_seqs, window_hits
from forensics.ownership.steps.overlaps import alloc_overlaps, inj_pairs
from forensics.ownership.steps.replay import replay_rooms
from forensics.ownership.steps.screen import own_rooms_by_query, screen_rooms
from forensics.ownership.steps.transfers import transfer_links

# placing transfers on their receivers' event order: needs both sides, runs on the whole database
PLACEMENT = (
    "telemetry_nodes",
    "seq_gaps",  # from ingest's seq_jumps
    "node_index",
    transfer_links,
    "clock_bounds",
    "landing_bounds",
    landing_seqs,
    "transfer_landing",
    window_hits,
    "landing_ambiguous",
    transfer_conflicts,
)

# tables a node task produces, with their columns that hold node-local event ranks or item ids
NODE_TABLES: dict[str, tuple[str, ...]] = {
    "timeline": ("kg",),
    "room_state": ("kg", "nf_kg"),
    "holdings": ("kg_a", "kg_f"),
    "alloc_overlaps": (),
    "anomalous_writes": ("kg",),
    "room_injected": ("kg",),
    "history_items": ("item",),
    "history_found": ("item",),
    "history_open": ("item",),
    "node_own_rooms": (),
}
# of those, the ones loaded back as temp tables: lookups for the findings, not kept in incident.duckdb
SCRATCH_TABLES = ("node_own_rooms",)


def node_ownership(con: duckdb.DuckDBPyConnection, screen: bool = True) -> None:
    """The per-node steps, on a connection holding page_events, transfer_landing, node_index and
    telemetry_nodes.
    screen: replay in detail only the rooms the screening pass flags (forensics.ownership.steps.screen)."""
    run_query(con, "ownership", "timeline")
    fits = scalar(con, "SELECT coalesce(bool_and(fits), true) FROM timeline_keys")
    run_query(con, "ownership", "timeline_view" if fits else "timeline_ranked")
    run_query(con, "ownership", "room_injected_empty")
    if screen:
        screen_rooms(con)  # also notes the rooms of each node's own events (node_own_rooms)
    else:
        own_rooms_by_query(con)
    replay_rooms(con, holders_only=False, screened=screen)
    con.execute("DROP TABLE IF EXISTS room_state")
    con.execute("ALTER TABLE room_state_new RENAME TO room_state")
    run_query(con, "ownership", "holdings")
    with timed("ownership/alloc_overlaps"):
        alloc_overlaps(con)
    run_query(con, "ownership", "anomalous_writes")
    with timed("ownership/inj_pairs"):
        inj_pairs(con)
    run_query(con, "ownership", "room_injected")
    # second pass: only the rooms that foreign writes hit, replayed with those writes
    replay_rooms(con, holders_only=True)
    con.execute("DELETE FROM room_state WHERE (node, room) IN (SELECT node, holder FROM room_injected)")
    con.execute("INSERT INTO room_state SELECT * FROM room_state_new")
    con.execute("DROP TABLE room_state_new")
    run_query(con, "ownership", "history_items")
    if screen:  # the screening pass already found every flagged read's last writers
        run_query(con, "ownership", "history_direct")
        bad = con.execute("SELECT item, want, got FROM history_check ORDER BY item LIMIT 1").fetchall()
        if bad:
            raise RuntimeError(
                f"internal error: history item {bad[0][0]} covers {bad[0][1]} slots, the screen {bad[0][2]}"
            )
        return
    run_query(con, "ownership", "history_search")
    for window in HISTORY_WINDOWS:
        if scalar(con, "SELECT count(*) FROM history_open") == 0:
            break
        run_query(con, "ownership", "history_cand", hw=window)
        history_round(con)


NODE = NodeStage(node_ownership, NODE_TABLES, SCRATCH_TABLES)

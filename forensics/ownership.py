"""Ownership stage: rebuild, per node, who held each KV slot range when and whose data it held.

Transfers, logged by the sender on its own clock, are placed on the receiver's event order using the
clock-offset bounds that ordinary transfers imply. Slot ranges stay ranges, and the work stays local:
 1. each room's own history is replayed on its own range boundaries (room_state);
 2. writes into slots the writer does not hold (late transfers) are matched to the holdings they hit
    and injected into those rooms' histories, which are replayed again;
 3. reads whose content predates their allocation (placeholders, shares) look up the last writer in
    the node's recent writes, widening the window only for what is still unexplained.
Transfer placement needs every node; everything after it is node-local and runs as per-node tasks
(forensics.nodework: in this process, in worker processes, or on Ray).
Reads: page_events, replay_window. Writes: telemetry_nodes, seq_gaps, transfer_links (forensics.transfers),
clock_bounds,
transfer_landing, transfer_conflicts (forensics.conflicts), node_index; through the node tasks: timeline,
room_state (forensics.replay), holdings,
alloc_overlaps, anomalous_writes, room_injected, history_items, history_found, node_own_rooms (temp: the
rooms of each node's own events, noted by the screen),
history_open (last writers: from the screening pass, or with --full-replay the windowed search of
forensics.history: SQL candidates, numpy envelope).
"""

from __future__ import annotations

import duckdb

from forensics.conflicts import transfer_conflicts
from forensics.db import run_steps
from forensics.landing import landing_seqs, window_hits
from forensics.nodework import Execution, run_nodes
from forensics.seqs import seq_jumps
from forensics.transfers import transfer_links

# query files (queries/ownership/<name>.sql) and numpy steps, in order
PLACEMENT = (
    "telemetry_nodes",
    seq_jumps,
    "seq_gaps",
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


def rebuild_ownership(con: duckdb.DuckDBPyConnection, execution: Execution | None = None) -> None:
    """Place transfers (needs every node), then the per-node work (forensics.nodework) for each node."""
    run_steps(con, "ownership", PLACEMENT)
    run_nodes(con, execution or Execution())

"""Ownership stage: rebuild, per node, who held each KV slot range when and whose data it held.

Transfers, logged by the sender on its own clock, are placed on the receiver's event order using the
clock-offset bounds that ordinary transfers imply. Slot ranges stay ranges, and the work stays local:
 1. each room's own history is replayed on its own range boundaries (room_state);
 2. writes into slots the writer does not hold (late transfers) are matched to the holdings they hit
    and injected into those rooms' histories, which are replayed again;
 3. reads whose content predates their allocation (placeholders, shares) find their last writers in
    the screening walk (or, with --full-replay, in a windowed search over the node's recent writes).

Three kinds of code, kept apart:
- steps/: the step list (steps/__init__.py: PLACEMENT needs every node, NODE is one node's work) and
  the steps themselves, SQL in ownership/queries/ and Python over DuckDB tables;
- kernels/: the compiled per-event walks (numpy and numba only, no DuckDB);
- execution/: how the per-node work runs (in this process, worker processes or Ray; the cache) and
  how events stream out of DuckDB in order.

Reads: page_events, replay_window, seq_jumps (ingest). Writes: telemetry_nodes, seq_gaps,
node_index, transfer_links, clock_bounds, transfer_landing, transfer_conflicts; per node: timeline,
room_state, holdings, alloc_overlaps, anomalous_writes, room_injected, history_items, history_found,
history_open, node_own_rooms (temp: scratch the findings read, dropped by release_scratch).
"""

from __future__ import annotations

import duckdb

from forensics.db import run_steps
from forensics.ownership.execution.engine_logs import engine_loader
from forensics.ownership.execution.nodes import Execution, NodeRun, run_nodes
from forensics.ownership.execution.walks import on_cluster
from forensics.ownership.steps import NODE, PLACEMENT, SCRATCH_TABLES

__all__ = ["Execution", "NodeRun", "engine_loader", "on_cluster", "rebuild_ownership", "release_scratch"]


def rebuild_ownership(con: duckdb.DuckDBPyConnection, execution: Execution | None = None) -> NodeRun:
    """Place transfers (needs every node), then each node's work (steps.NODE), in this process, in
    worker processes or on Ray as `execution` says; returns what the per-node work ran."""
    run_steps(con, "ownership", PLACEMENT)
    return run_nodes(con, NODE, execution or Execution())


def release_scratch(con: duckdb.DuckDBPyConnection) -> None:
    """Drop this stage's scratch tables (steps.SCRATCH_TABLES: node_own_rooms), lookups the findings read:
    the findings' step list calls this once their last reader has run."""
    for table in SCRATCH_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")

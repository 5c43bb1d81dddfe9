"""Ownership stage: rebuild, per node, who held each KV slot range when and whose data it held.

Transfers, logged by the sender on its own clock, are placed on the receiver's event order using the
clock-offset bounds that ordinary transfers imply. Slot ranges stay ranges: events are split only at
the boundaries events themselves draw (elementary segments), never into single slots.
Reads: page_events. Writes: telemetry_nodes, seq_gaps, transfer_links, clock_bounds,
transfer_landing, timeline, segment_bounds, seg_events, seg_state.
"""

from __future__ import annotations

import duckdb

from forensics.db import run_query

STEPS = ("telemetry_nodes", "seq_gaps", "transfer_bounds", "transfer_landing", "timeline", "segments", "seg_state")


def rebuild_ownership(con: duckdb.DuckDBPyConnection) -> None:
    for step in STEPS:
        run_query(con, "ownership", step)

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
history_items, history_found, history_open (the last-writer search: SQL candidates, numpy envelope).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forensics.db import run_query, timed
from forensics.envelope import envelope
from forensics.nodework import Execution, run_nodes

PLACEMENT = ("telemetry_nodes", "seq_gaps", "node_index", "transfer_bounds", "transfer_landing")
# History windows, in writes before the read: most reads resolve in the first; 0 means all.
HISTORY_WINDOWS = (256, 4096, 32768, 0)


def rebuild_ownership(con: duckdb.DuckDBPyConnection, execution: Execution | None = None) -> None:
    """Place transfers (needs every node), then the per-node work (forensics.nodework) for each node."""
    for step in PLACEMENT:
        run_query(con, "ownership", step)
    run_nodes(con, execution or Execution())


def history_round(con: duckdb.DuckDBPyConnection) -> None:
    """Split the open pieces by this round's candidates (history_cand); found parts go to history_found
    with their writer, the rest stays in history_open for a wider round."""
    with timed("ownership/history_envelope"):
        o = con.sql("SELECT item, s, e FROM history_open").fetchnumpy()
        c = con.sql("SELECT item, cs, ce, k FROM cand").fetchnumpy()
        env = envelope(o["item"], o["s"], o["e"], c["item"], c["cs"], c["ce"], c["k"])
        runs = pa.table({"item": env.item, "s": env.s, "e": env.e, "w_k": env.k})
        con.register("envelope_runs", runs)
        con.execute("""INSERT INTO history_found
            SELECT r.item, r.s, r.e, w.room, w.k, w.ambiguous, w.ts
            FROM envelope_runs r JOIN history_items i USING (item)
            JOIN history_writes w ON w.node = i.node AND w.k = r.w_k
            WHERE r.w_k >= 0""")
        con.execute("CREATE OR REPLACE TABLE history_open AS SELECT item, s, e FROM envelope_runs WHERE w_k < 0")
        con.unregister("envelope_runs")

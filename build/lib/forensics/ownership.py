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
history_open (last writers: from the screening pass, or with --full-replay the windowed search: SQL
candidates, numpy envelope).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forensics.conflicts import transfer_conflicts
from forensics.db import run_steps, timed
from forensics.envelope import envelope
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
# History windows, in writes before the read: most reads resolve in the first; 0 means all.
HISTORY_WINDOWS = (256, 4096, 32768, 0)
# candidates resolved per numpy envelope call (items are split into chunks of about this many)
ENVELOPE_CHUNK = 8_000_000


def rebuild_ownership(con: duckdb.DuckDBPyConnection, execution: Execution | None = None) -> None:
    """Place transfers (needs every node), then the per-node work (forensics.nodework) for each node."""
    run_steps(con, "ownership", PLACEMENT)
    run_nodes(con, execution or Execution())


def history_round(con: duckdb.DuckDBPyConnection) -> None:
    """Split the open pieces by this round's candidates (history_cand); found parts go to history_found
    with their writer, the rest stays in history_open for a wider round. Items are independent: they
    are resolved in chunks of at most ENVELOPE_CHUNK candidates, so memory stays bounded."""
    with timed("ownership/history_envelope"):
        bounds = _item_chunks(con)
        con.execute("CREATE OR REPLACE TEMP TABLE history_open_next (item BIGINT, s BIGINT, e BIGINT)")
        for lo, hi in bounds:
            o = con.execute("SELECT item, s, e FROM history_open WHERE item BETWEEN ? AND ?", [lo, hi]).fetchnumpy()
            c = con.execute("SELECT item, cs, ce, k FROM cand WHERE item BETWEEN ? AND ?", [lo, hi]).fetchnumpy()
            env = envelope(o["item"], o["s"], o["e"], c["item"], c["cs"], c["ce"], c["k"])
            runs = pa.table({"item": env.item, "s": env.s, "e": env.e, "w_k": env.k})
            con.register("envelope_runs", runs)
            try:
                con.execute("""INSERT INTO history_found
                    SELECT r.item, r.s, r.e, w.room, w.k, w.ambiguous, w.ts
                    FROM envelope_runs r JOIN history_items i USING (item)
                    JOIN history_writes w ON w.node = i.node AND w.k = r.w_k
                    WHERE r.w_k >= 0""")
                con.execute("INSERT INTO history_open_next SELECT item, s, e FROM envelope_runs WHERE w_k < 0")
            finally:
                con.unregister("envelope_runs")
        con.execute("CREATE OR REPLACE TABLE history_open AS SELECT * FROM history_open_next")
        con.execute("DROP TABLE history_open_next")


def _item_chunks(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int]]:
    """Consecutive item ranges [lo, hi] holding at most about ENVELOPE_CHUNK candidates each."""
    rows = con.execute(
        """SELECT item, coalesce(n, 0) FROM (SELECT DISTINCT item FROM history_open) o
           LEFT JOIN (SELECT item, count(*) AS n FROM cand GROUP BY item) c USING (item) ORDER BY item"""
    ).fetchall()
    chunks: list[tuple[int, int]] = []
    start: int | None = None
    prev, total = 0, 0
    for item, n in rows:
        if start is not None and total + n > ENVELOPE_CHUNK:
            chunks.append((start, prev))
            start, total = None, 0
        if start is None:
            start = item
        total += n
        prev = item
    if start is not None:
        chunks.append((start, prev))
    return chunks

"""Findings stage, the possible sources of an affected response on a receiver whose senders lost page events or
kept none (spec section 7: every indeterminate response gets possible sources, a superset by
construction).

A sender's lost transfers are invisible on the receiver: the ownership's last writer of a slot a
response read (read_provenance: w_pos) is the last write the evidence proves, and a transfer nobody
logged may have landed on the slot after it. A transfer lands in the slots its room allocated on the
receiver, after that alloc; before the room's free there when the room read on the receiver (the
receiver runs a request only once its KV arrived), at any later time when it did not (an aborted room,
whose transfer may land after its free). So a room S whose transfer may be invisible (no transfer of it
logged on the receiver, or one from a sender that lost events: its other transfers may be lost) is a
possible source of a read of slots [s, e) at position p whose last proven write is at w when one of
S's holdings there overlaps [s, e) with its alloc before p and its possible landing end after w:
  - allocated between w and p: a sweep (forensics.ownership.kernels.sweep.hits) with S's alloc as the
    query and the read's (w, p) as the interval;
  - allocated before w, its landing possible after w: the same sweep with the read's w as the query.
Both sweeps cost the events plus the pairs found: the rooms that held the read slots between their last
proven write and the read, never every room with every room. sender_sources.sql keeps the pairs.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, run_query
from forensics.ownership.kernels.sweep import hits

# the reads of the affected responses (a confirmed one too: its own transfer logged, the stale slots it
# read may hold another room's unlogged transfer rather than the proven writer's KV) on receivers a
# silent or lossy sender fed, with global keys (node base + position): the last proven write (or the
# node's start) and the read
READS = """WITH blind AS (  -- receivers whose senders may have lost transfers: a prefill node kept no
                           -- page records (every receiver), or a sender to it lost events
    SELECT DISTINCT receiver AS node FROM transfer_links
    WHERE EXISTS (SELECT node FROM node_config WHERE role = 'prefill'
                  UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
                  EXCEPT SELECT node FROM telemetry_nodes)
       OR sender IN (SELECT node FROM seq_gaps WHERE kind = 'lost')
    UNION
    SELECT DISTINCT node FROM page_events WHERE op = 'read' AND EXISTS (
        SELECT node FROM node_config WHERE role = 'prefill'
        UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
        EXCEPT SELECT node FROM telemetry_nodes)
), recipient AS (
    SELECT DISTINCT r.node, r.room FROM affected_responses a JOIN room_requests r ON r.request_id = a.request_id
    WHERE a.evidence = 'pages'
    UNION
    SELECT DISTINCT decode_node, room FROM affected_responses WHERE evidence = 'pages' AND room IS NOT NULL
)
SELECT p.node, p.room, p.seg_start, p.seg_end, x.base + coalesce(p.w_pos, -1) AS gw, x.base + p.pos AS gp
FROM read_provenance p JOIN node_index x USING (node)
WHERE p.node IN (SELECT node FROM blind) AND (p.node, p.room) IN (SELECT (node, room) FROM recipient)
  AND p.seg_end > p.seg_start
ORDER BY p.node, p.room, p.pos, p.seg_start"""

# the holdings of rooms whose transfer may be invisible: (node, room, slots, alloc, the end of its landing)
HELD = """WITH lossy AS (SELECT DISTINCT node FROM seq_gaps WHERE kind = 'lost'),
readers AS (SELECT DISTINCT node, room FROM page_events WHERE op = 'read')
SELECT h.node, h.room, h.seg_start, h.seg_end, x.base + key_pos(h.a_k) AS ga,
       CASE WHEN (h.node, h.room) IN (SELECT (node, room) FROM readers) AND h.f_k IS NOT NULL
            THEN x.base + key_pos(h.f_k) ELSE node_end(x.base) END AS gf
FROM holdings h JOIN node_index x USING (node)
WHERE h.seg_end > h.seg_start AND h.a_k IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = h.node AND t.room = h.room
                  AND t.sender NOT IN (SELECT node FROM lossy))
UNION ALL  -- rooms the replay keeps no holdings of (they never read: aborted): each alloc, landing without end
SELECT a.node, a.room, a.start, a."end", x.base + own_pos(a.seq), node_end(x.base)
FROM page_events a JOIN node_index x USING (node)
WHERE a.op = 'alloc' AND a.room IS NOT NULL AND a."end" > a.start
  AND (a.node, a.room) NOT IN (SELECT (node, room) FROM holdings)
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = a.node AND t.room = a.room
                  AND t.sender NOT IN (SELECT node FROM lossy))
ORDER BY 1, 2, 5, 3"""


def _i64(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(t[name].to_numpy(zero_copy_only=False), dtype=np.int64)


def _pairs(reads: pa.Table, held: pa.Table) -> pa.Table:
    """(node, recipient_room, source_room) of every read and holding the module's rule pairs."""
    gw, gp, rs, re_ = (_i64(reads, c) for c in ("gw", "gp", "seg_start", "seg_end"))
    ga, gf, hs, he = (_i64(held, c) for c in ("ga", "gf", "seg_start", "seg_end"))
    # allocated between the last proven write and the read: the alloc is the query, (w, p) the interval
    h1, r1 = hits(ga, hs, he, gw, gp, rs, re_)
    # allocated before the last proven write, its landing possible after it: w is the query
    r2, h2 = hits(gw, rs, re_, ga, gf, hs, he)
    r, h = np.concatenate([r1, r2]), np.concatenate([h1, h2])
    return pa.table(
        {
            "node": reads["node"].take(r),
            "recipient_room": reads["room"].take(r),
            "source_room": held["room"].take(h),
        }
    )


def sender_sources(con: duckdb.DuckDBPyConnection) -> None:
    """sender_sources (node, recipient_room, source_room): per affected response on a receiver whose
    senders lost page events or kept none, every room whose invisible transfer may hold what it read."""
    reads = con.sql(READS).to_arrow_table()
    held = con.sql(HELD).to_arrow_table()
    with arrow_view(con, "sender_hits", _pairs(reads, held)):
        run_query(con, "findings", "sender_sources")

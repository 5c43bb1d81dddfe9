-- Per lost seq gap of a node with page telemetry, every room whose KV a response reading after it could
-- have attended (forensics.findings.gap_sources): holder, the last writer of some slot before the gap
-- (gap_holders, the envelope over the whole pool), or a room whose landing the clock bounds cannot
-- order before it (ambiguous, or conflicting with another); in_flight, a room whose lost events may
-- have written: its page events neither end with a free before the gap nor begin with an alloc after it,
-- or a request the gateway sent to the node with no page events there (missing_rooms). A superset: a
-- room is left out only where the node's own events prove it could have written nothing in the gap and
-- held no slot's last write when the gap began.
-- grain: node, gap_seq, room; reads: gap_holders, seq_gaps, page_events, transfer_landing, missing_rooms;
--        params: none
CREATE OR REPLACE TABLE gap_sources AS
WITH gaps AS (
    SELECT row_number() OVER (ORDER BY node, prev_seq) - 1 AS item, node, prev_seq, next_seq, missing
    FROM seq_gaps WHERE kind = 'lost'
), span AS (  -- each room's own events on the node: its first and last, and what they are
    SELECT node, room, min(seq) AS first_seq, max(seq) AS last_seq, arg_min(op, seq) AS first_op,
           arg_max(op, seq) AS last_op
    FROM page_events WHERE room IS NOT NULL AND node IN (SELECT node FROM gaps) GROUP BY node, room
), unordered AS (  -- landings before the gap whose order against the node's events is not proven
    SELECT g.node, g.prev_seq, t.room FROM gaps g JOIN transfer_landing t ON t.receiver = g.node
    WHERE (t.ambiguous OR t.conflict) AND coalesce(t.seq_lo, g.prev_seq) <= g.prev_seq
), found AS (
    SELECT g.node, g.prev_seq, h.room, true AS holder, false AS in_flight
    FROM gap_holders h JOIN gaps g USING (item)
    UNION ALL
    SELECT node, prev_seq, room, true, false FROM unordered
    UNION ALL
    SELECT g.node, g.prev_seq, s.room, false, true FROM gaps g JOIN span s ON s.node = g.node
    WHERE NOT (s.last_seq <= g.prev_seq AND s.last_op = 'free')
      AND NOT (s.first_seq >= g.next_seq AND s.first_op = 'alloc')
    UNION ALL
    SELECT g.node, g.prev_seq, m.room, false, true FROM gaps g JOIN missing_rooms m ON m.node = g.node
    WHERE m.room IS NOT NULL
)
SELECT node, prev_seq AS gap_seq, room, bool_or(holder) AS holder, bool_or(in_flight) AS in_flight
FROM found GROUP BY ALL ORDER BY ALL;

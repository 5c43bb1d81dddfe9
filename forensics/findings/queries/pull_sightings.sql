-- What a transfer carried where its sender's slots held another room's KV (vLLM's pull through a stale
-- reference, vLLM #52234): a transfer sends its room's KV from the sender's slots the room was given
-- (alloc, share); where another room wrote one of those slots after the room was given it and before the
-- transfer, the receiver got the last such writer's KV in the slot the transfer names for that token.
-- Another room writes a slot the room still holds only through a double allocation (ownership's hazards);
-- so only rooms that freed slots on the sender before their last transfer there are searched, which
-- keeps the range joins to those few rooms. Sender and receiver slots are matched by the room's token
-- order (its alloc/share rows and its transfer rows, each in seq order). certain where the receiver's
-- page events show the room reading that slot; without them the sighting is uncertain (no read is seen).
-- grain: node, seg_start, recipient_room, source_room; reads: page_events; params: none
CREATE OR REPLACE TABLE pull_sightings AS
WITH sent AS (  -- each transfer row's tokens of its room
    SELECT node, room, peer, seq, ts, start, "end",
           sum("end" - start) OVER (PARTITION BY node, room ORDER BY seq) - ("end" - start) AS tok
    FROM page_events WHERE op = 'transfer'
), last_sent AS (
    SELECT node, room, max(seq) AS seq FROM sent GROUP BY node, room
), early AS (  -- rooms that freed slots on the sender before their last transfer from it
    SELECT DISTINCT f.node, f.room, l.seq AS last_seq
    FROM page_events f JOIN last_sent l USING (node, room)
    WHERE f.op = 'free' AND f.seq < l.seq
), given AS (  -- the sender's slots of each such room, in token order
    SELECT e.node, e.room, e.seq, e.start, e."end", l.last_seq,
           sum(e."end" - e.start) OVER (PARTITION BY e.node, e.room ORDER BY e.seq) - (e."end" - e.start) AS tok
    FROM page_events e JOIN early l USING (node, room)
    WHERE e.op IN ('alloc', 'share') AND e.seq < l.last_seq
), over AS (  -- the slots another room wrote after the room was given them and before its last transfer
    SELECT DISTINCT g.node, g.room, s.slot, g.tok + s.slot - g.start AS tok, g.seq AS given_seq
    FROM given g
    JOIN page_events w ON w.node = g.node AND w.op = 'write' AND w.room <> g.room
         AND w.start < g."end" AND g.start < w."end" AND w.seq > g.seq AND w.seq < g.last_seq,
         LATERAL (SELECT unnest(range(greatest(w.start, g.start), least(w."end", g."end"))) AS slot) s
), carried AS (  -- per transfer row covering the token: the slot's last writer since the room was given it
    SELECT o.node, o.room, x.peer, x.ts, x.start + o.tok - x.tok AS recv_slot, arg_max(w.room, w.seq) AS w_room
    FROM over o
    JOIN sent x ON x.node = o.node AND x.room = o.room AND o.tok >= x.tok AND o.tok < x.tok + x."end" - x.start
    JOIN page_events w ON w.node = o.node AND w.op = 'write' AND w.start <= o.slot AND o.slot < w."end"
         AND w.seq > o.given_seq AND w.seq < x.seq
    GROUP BY ALL
)
SELECT c.peer AS node, c.recv_slot AS seg_start, c.recv_slot + 1 AS seg_end, c.room AS recipient_room,
       c.w_room AS source_room, 'foreign_write' AS kind, min(coalesce(r.ts, c.ts)) AS first_ts,
       bool_and(r.node IS NULL) AS uncertain
FROM carried c
LEFT JOIN page_events r ON r.node = c.peer AND r.op = 'read' AND r.room = c.room
     AND r.start <= c.recv_slot AND c.recv_slot < r."end"
WHERE c.w_room <> c.room
GROUP BY ALL;

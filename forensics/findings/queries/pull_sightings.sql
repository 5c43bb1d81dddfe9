-- What a transfer carried where its sender's slots held another room's KV (vLLM's pull through a stale
-- reference, vLLM #52234): a transfer sends its room's KV from the sender's slots the room was given
-- (alloc, share); where another room wrote one of those slots after the room was given it and before the
-- transfer, the receiver got the last such writer's KV in the slot the transfer names for that token.
-- Sender and receiver slots are matched by the room's token order (its alloc/share rows and its transfer
-- rows, each in seq order). certain where the receiver's page events show the room reading that slot;
-- a receiver without them leaves the sighting uncertain (the read is not seen).
-- grain: node, seg_start, recipient_room, source_room; reads: page_events; params: none
CREATE OR REPLACE TABLE pull_sightings AS
WITH sent AS (  -- each transfer row's tokens of its room
    SELECT node, room, peer, seq, ts, start, "end",
           sum("end" - start) OVER (PARTITION BY node, room ORDER BY seq) - ("end" - start) AS tok
    FROM page_events WHERE op = 'transfer'
), last_sent AS (
    SELECT node, room, max(seq) AS seq FROM sent GROUP BY node, room
), given AS (  -- the sender's slots of each room it sends, in token order
    SELECT e.node, e.room, e.seq, e.start, e."end",
           sum(e."end" - e.start) OVER (PARTITION BY e.node, e.room ORDER BY e.seq) - (e."end" - e.start) AS tok
    FROM page_events e JOIN last_sent l USING (node, room)
    WHERE e.op IN ('alloc', 'share') AND e.seq < l.seq
), over AS (  -- the slots another room wrote after the room was given them and before its last transfer
    SELECT DISTINCT g.node, g.room, s.slot, g.tok + s.slot - g.start AS tok
    FROM given g
    JOIN last_sent l USING (node, room)
    JOIN page_events w ON w.node = g.node AND w.op = 'write' AND w.room <> g.room
         AND w.start < g."end" AND g.start < w."end" AND w.seq > g.seq AND w.seq < l.seq,
         LATERAL (SELECT unnest(range(greatest(w.start, g.start), least(w."end", g."end"))) AS slot) s
), carried AS (  -- per transfer row covering the token: the slot's last writer before that row
    SELECT o.node, o.room, x.peer, x.ts, x.start + o.tok - x.tok AS recv_slot,
           arg_max(w.room, w.seq) AS w_room
    FROM over o
    JOIN sent x ON x.node = o.node AND x.room = o.room AND o.tok >= x.tok AND o.tok < x.tok + x."end" - x.start
    JOIN page_events w ON w.node = o.node AND w.op = 'write' AND w.start <= o.slot AND o.slot < w."end"
         AND w.seq < x.seq
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

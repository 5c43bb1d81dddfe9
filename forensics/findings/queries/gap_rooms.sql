-- Rooms some of whose own events may be lost: events on both sides of a seq gap on a node, or reads on
-- a receiver with no transfer of their own while a node sending to that receiver lost events (the
-- lost events may hold that transfer), or while a prefill node kept no page records at all (its page
-- file cut or lost, or never recorded: no transfer of it is ever seen, so which slots a room's own
-- transfer wrote is unknown; which receivers it sent to is not known either, so every receiver counts).
-- Their reads cannot rule out their own data.
-- grain: node (where the events are missing), room; reads: page_events, seq_gaps, transfer_links,
--        node_config, gateway, telemetry_nodes; params: none
CREATE OR REPLACE TABLE gap_rooms AS
SELECT p.node, p.room
FROM page_events p JOIN seq_gaps g ON g.node = p.node
GROUP BY p.node, p.room, g.prev_seq, g.next_seq
HAVING min(p.seq) < g.next_seq AND max(p.seq) > g.prev_seq
UNION
SELECT r.node, r.room
FROM page_events r
JOIN (SELECT DISTINCT s.receiver FROM seq_gaps g JOIN (SELECT DISTINCT sender, receiver FROM transfer_links) s
      ON s.sender = g.node) lossy ON lossy.receiver = r.node  -- first: usually no receiver is lossy
WHERE r.op = 'read'
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = r.node AND t.room = r.room)
UNION
SELECT r.node, r.room
FROM page_events r
WHERE r.op = 'read'
  AND EXISTS (SELECT node FROM node_config WHERE role = 'prefill'
              UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
              EXCEPT SELECT node FROM telemetry_nodes)
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = r.node AND t.room = r.room);

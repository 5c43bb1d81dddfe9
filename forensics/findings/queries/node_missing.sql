-- Served requests routed to one node ($node) that has page telemetry but logged no event of its own
-- for their room: the candidates of missing_rooms.sql, found one node at a time, so that each anti
-- join holds one node's rooms (at 1B events an anti join over every node at once spilled for minutes).
-- grain: node, gateway row; reads: gateway, node_own_rooms (the rooms of the node's own events, noted by
--        the ownership stage), replay_window; params: $node
INSERT INTO node_missing
SELECT $node, g.file_id, g.row
FROM gateway g
CROSS JOIN replay_window w
ANTI JOIN (SELECT room FROM node_own_rooms WHERE node = $node) seen ON seen.room = g.bootstrap_room
WHERE $node IN (g.decode_node, g.prefill_node)
  AND g.bootstrap_room IS NOT NULL AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
  AND g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ);

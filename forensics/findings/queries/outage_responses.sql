-- Served requests whose evidence a log outage (log_outages) may have taken: routed to the node in a
-- role that evidence decides, their span [ts - duration, ts + duration] meeting the outage.
-- The engine log decides the requests of a decode node without page telemetry (the placeholder
-- signature: its decode lines and its prefill node's placeholder lines; the transfer failures that
-- make late writes): every such request meeting the outage. Page events decide every request of a node
-- with page telemetry (as decode or prefill), and a room whose life on the node the events show whole
-- (its first event an alloc, its last a free, in seq order) lost nothing: only the rooms they never
-- name, or whose life they show cut, are taken (a seq gap the room straddles is room_flags' part).
-- A response here is indeterminate, never clean (affected_responses).
-- grain: request_id, node, source; reads: log_outages, gateway, page_events, telemetry_nodes,
--        replay_window; params: none
CREATE OR REPLACE TABLE outage_responses AS
WITH met AS (
    SELECT g.request_id, g.bootstrap_room AS room, g.decode_node, o.node, o.source, o.gap_from, o.gap_to
    FROM log_outages o
    JOIN gateway g ON o.node IN (g.decode_node, g.prefill_node)
    CROSS JOIN replay_window w
    WHERE g.bootstrap_room IS NOT NULL AND g.ts IS NOT NULL
      AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
      AND g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
      AND g.ts + to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) >= o.gap_from
      AND g.ts - to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) <= o.gap_to
), life AS (  -- the first and last event of each such room on the node
    SELECT p.node, p.room, arg_min(p.op, p.seq) AS first_op, arg_max(p.op, p.seq) AS last_op
    FROM page_events p
    SEMI JOIN (SELECT node, room FROM met WHERE source = 'pages') m ON m.node = p.node AND m.room = p.room
    GROUP BY p.node, p.room
)
SELECT DISTINCT m.request_id, m.node, m.source,
       'served while ' || m.node || '''s ' || CASE m.source WHEN 'engine_log' THEN 'engine log' ELSE 'page events' END
       || ' has an outage (' || strftime(m.gap_from, '%Y-%m-%dT%H:%M:%SZ') || ' to '
       || strftime(m.gap_to, '%Y-%m-%dT%H:%M:%SZ') || '): its evidence may be lost' AS reason
FROM met m
LEFT JOIN life l ON l.node = m.node AND l.room = m.room
WHERE (m.source = 'engine_log' AND m.decode_node IS NOT NULL AND m.decode_node NOT IN (SELECT node FROM telemetry_nodes))
   OR (m.source = 'pages' AND (l.room IS NULL OR l.first_op <> 'alloc' OR l.last_op <> 'free'));

-- Served requests routed to a node with page telemetry that logged nothing for them there: whatever
-- they attended is unknown, so they are indeterminate, never clean. With a replay window, only
-- requests received inside it are in scope (their events may still lie after --until: indeterminate).
-- grain: request_id, node; reads: gateway, telemetry_nodes, node_rooms, request_cohort, replay_window; params: none
CREATE OR REPLACE TABLE missing_rooms AS
WITH served AS (
    SELECT g.*, n.node FROM gateway g
    CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n
    WHERE g.bootstrap_room IS NOT NULL AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
), missing AS MATERIALIZED (  -- found first, so that only they look up their cohort
    SELECT s.* FROM served s
    JOIN telemetry_nodes t ON t.node = s.node
    CROSS JOIN replay_window w
    ANTI JOIN (SELECT node, room FROM node_rooms WHERE own) seen ON seen.node = s.node AND seen.room = s.bootstrap_room
    WHERE s.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND s.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
)
SELECT s.request_id, s.account_id, coalesce(c.cohort, 'customer') AS cohort, s.node, s.bootstrap_room AS room,
       s.status AS http_status, s.completion_tokens, s.ts
FROM missing s
LEFT JOIN request_cohort c ON c.file_id = s.file_id AND c.row = s.row;

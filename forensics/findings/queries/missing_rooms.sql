-- Served requests routed to a node with page telemetry that logged nothing for them there: whatever
-- they attended is unknown, so they are indeterminate, never clean. With a replay window, only
-- requests received inside it are in scope (their events may still lie after --until: indeterminate).
-- grain: request_id, node; reads: gateway, node_missing (per node: node_missing.sql), request_cohort;
--        params: none
CREATE OR REPLACE TABLE missing_rooms AS
SELECT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, m.node, g.bootstrap_room AS room,
       g.status AS http_status, g.completion_tokens, g.ts
FROM node_missing m
JOIN gateway g ON g.file_id = m.file_id AND g.row = m.row
CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n  -- once per role it has there
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
WHERE n.node = m.node;

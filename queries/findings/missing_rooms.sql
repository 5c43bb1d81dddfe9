-- Served requests routed to a node with page telemetry that logged nothing for them there: whatever
-- they attended is unknown, so they are indeterminate, never clean. With a replay window, only
-- requests received inside it are in scope (their events may still lie after --until: indeterminate).
-- grain: request_id, node; reads: gateway, node_missing (per node: node_missing.sql), request_cohort;
--        params: none
CREATE OR REPLACE TABLE missing_rooms AS
WITH served AS (
    SELECT g.*, n.node FROM gateway g
    CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n
    WHERE (g.file_id, g.row) IN (SELECT file_id, row FROM node_missing)
)
SELECT s.request_id, s.account_id, coalesce(c.cohort, 'customer') AS cohort, s.node, s.bootstrap_room AS room,
       s.status AS http_status, s.completion_tokens, s.ts
FROM served s
JOIN node_missing m ON m.node = s.node AND m.file_id = s.file_id AND m.row = s.row
LEFT JOIN request_cohort c ON c.file_id = s.file_id AND c.row = s.row;

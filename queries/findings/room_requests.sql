-- Which client request a (node, room) belongs to: bootstrap_room joins the gateway to both engines.
-- When the gateway names the nodes, the node must be one of them.
-- grain: node, room, request_id; reads: gateway, request_cohort, timeline; params: none
CREATE OR REPLACE TABLE room_requests AS
WITH rooms AS (
    SELECT DISTINCT node, room FROM timeline
    UNION SELECT DISTINCT node, room FROM page_events WHERE op = 'transfer'
)
SELECT r.node, r.room, g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort,
       coalesce(c.cohort_kind, 'customer') AS cohort_kind, g.status AS http_status, g.completion_tokens, g.ts
FROM rooms r
JOIN gateway g ON g.bootstrap_room = r.room
  AND (r.node IN (g.decode_node, g.prefill_node) OR (g.decode_node IS NULL AND g.prefill_node IS NULL))
LEFT JOIN request_cohort c ON c.request_id = g.request_id AND c.file_id = g.file_id AND c.row = g.row;

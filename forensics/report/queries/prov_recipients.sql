-- The confirmed affected responses whose provenance the report prints, earliest first, capped at
-- $prov_limit requests; with the (node, room) where they read another request's data.
-- grain: request_id, node, room; reads: affected_responses, room_requests, exposure_segments; params: prov_limit
CREATE OR REPLACE TEMP TABLE report_prov AS
WITH picked AS (
    SELECT request_id, account_id, cohort, http_status, completion_tokens, kinds, exposed_slots, first_exposed_at
    FROM affected_responses WHERE status = 'confirmed' AND evidence = 'pages'
    ORDER BY first_exposed_at, request_id LIMIT $prov_limit
)
SELECT p.*, rr.node, rr.room
FROM picked p JOIN (SELECT DISTINCT request_id, node, room FROM room_requests) rr USING (request_id)
WHERE (rr.node, rr.room) IN (SELECT node, recipient_room FROM exposure_segments WHERE certain);

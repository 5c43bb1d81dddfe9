-- Affected responses with the moment each counts as affected: first exposure, else (signature or
-- indeterminate without a sighting) the gateway's receive time. Temp view for the report queries.
-- grain: request_id; reads: affected_responses, gateway; params: none
CREATE OR REPLACE TEMP VIEW report_affected AS
SELECT a.*, g.ts AS request_ts, coalesce(a.first_exposed_at, g.ts) AS affected_at,
       coalesce(a.decode_node, '(unknown)') AS node
FROM affected_responses a
LEFT JOIN (SELECT DISTINCT ON (request_id) request_id, ts FROM gateway ORDER BY request_id, ts) g USING (request_id);

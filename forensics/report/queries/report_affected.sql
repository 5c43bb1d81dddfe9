-- Affected responses with the moment each counts as affected: first exposure, else (signature or
-- indeterminate without a sighting) the gateway's receive time (the earliest, if a request id repeats).
-- A temp table, made once: a view re-read the whole gateway log in every report query that used it.
-- grain: request_id; reads: affected_responses, gateway; params: none
CREATE OR REPLACE TEMP TABLE report_affected AS
SELECT a.*, g.ts AS request_ts, coalesce(a.first_exposed_at, g.ts) AS affected_at,
       coalesce(a.decode_node, '(unknown)') AS node
FROM affected_responses a
LEFT JOIN (SELECT request_id, min(ts) AS ts FROM gateway
           WHERE request_id IN (SELECT request_id FROM affected_responses) GROUP BY request_id) g USING (request_id);

-- When each affected response counts as affected: its first exposure, else (a signature response, or an
-- indeterminate one without a sighting) the gateway's receive time of the request (the earliest, if its
-- id repeats). One definition for the notices, the accounts' time spans and the report's window.
-- One row per request id: a request whose gateway records name two accounts has a row per account in
-- affected_responses, and one time.
-- grain: request_id; reads: affected_responses, gateway; params: none
CREATE OR REPLACE TABLE affected_times AS
SELECT a.request_id, any_value(g.ts) AS request_ts, coalesce(min(a.first_exposed_at), any_value(g.ts)) AS affected_at
FROM affected_responses a
LEFT JOIN (SELECT request_id, min(ts) AS ts FROM gateway
           WHERE request_id IN (SELECT request_id FROM affected_responses) GROUP BY request_id) g USING (request_id)
GROUP BY a.request_id
ORDER BY a.request_id;

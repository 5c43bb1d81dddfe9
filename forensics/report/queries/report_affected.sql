-- Affected responses with the moment each counts as affected (affected_times: first exposure, else the
-- gateway's receive time) and the node, as the report's queries read them.
-- A temp table, made once: a view re-read the whole gateway log in every report query that used it.
-- grain: request_id; reads: affected_responses, affected_times; params: none
CREATE OR REPLACE TEMP TABLE report_affected AS
SELECT a.*, t.request_ts, t.affected_at, coalesce(a.decode_node, '(unknown)') AS node
FROM affected_responses a LEFT JOIN affected_times t USING (request_id);

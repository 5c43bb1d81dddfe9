-- Per account, both directions: responses it received that held others' data, and its requests whose
-- data others attended. The contract's accounts.csv.
-- grain: account_id; reads: affected_responses, exposures, request_cohort; params: none
CREATE OR REPLACE TABLE accounts AS
WITH recv AS (
    SELECT account_id, count(DISTINCT request_id) AS responses_affected,  -- a request id in two records: once
           count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS responses_confirmed,
           count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS responses_indeterminate
    FROM affected_responses GROUP BY 1
), src AS (
    SELECT source_account_id AS account_id, count(DISTINCT source_request_id) AS requests_exposed,
           count(DISTINCT source_request_id) FILTER (WHERE status = 'confirmed') AS requests_exposed_confirmed
    FROM exposures WHERE source_account_id IS NOT NULL GROUP BY 1
), cohort AS (
    -- request_cohort has every gateway record (forensics.cohorts), with its account
    SELECT account_id, string_agg(DISTINCT cohort, ';' ORDER BY cohort) AS cohort FROM request_cohort GROUP BY 1
)
SELECT account_id, cohort.cohort, coalesce(recv.responses_affected, 0) AS responses_affected,
       coalesce(src.requests_exposed, 0) AS requests_exposed,
       coalesce(recv.responses_confirmed, 0) AS responses_confirmed,
       coalesce(recv.responses_indeterminate, 0) AS responses_indeterminate,
       coalesce(src.requests_exposed_confirmed, 0) AS requests_exposed_confirmed
FROM recv FULL JOIN src USING (account_id) LEFT JOIN cohort USING (account_id);

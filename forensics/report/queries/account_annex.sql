-- Per-account annex: every account on either side, with the request ids it received affected
-- responses for and the request ids whose data others attended.
-- grain: account_id; reads: accounts, report_affected, exposures; params: none
WITH recv AS (
    SELECT account_id, string_agg(request_id || ' (' || status || ')', ', ' ORDER BY request_id) AS received
    FROM (SELECT DISTINCT account_id, request_id, status FROM report_affected)  -- a request id in two records: once
    GROUP BY account_id
), src AS (
    SELECT source_account_id AS account_id,
           string_agg(DISTINCT source_request_id, ', ' ORDER BY source_request_id) AS exposed
    FROM exposures WHERE source_request_id <> '' GROUP BY 1
)
SELECT a.account_id, a.cohort, a.responses_affected, a.responses_confirmed, a.responses_indeterminate,
       a.requests_exposed, a.requests_exposed_confirmed, coalesce(recv.received, '') AS received,
       coalesce(src.exposed, '') AS exposed
FROM accounts a LEFT JOIN recv USING (account_id) LEFT JOIN src USING (account_id)
ORDER BY a.cohort LIKE '%customer%' DESC, a.account_id;

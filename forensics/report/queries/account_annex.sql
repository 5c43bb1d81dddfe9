-- Per-account annex: every account on either side, with the request ids it received affected
-- responses for and the request ids whose data others attended. The row without an account lists the
-- unknown accounts' requests: a source no gateway record names by its room ('room:<room>': source_key).
-- grain: account_id; reads: accounts, report_affected, exposures; params: none
WITH recv AS (
    SELECT coalesce(account_id, '') AS k, string_agg(request_id || ' (' || status || ')', ', ' ORDER BY request_id) AS received
    FROM (SELECT DISTINCT account_id, request_id, status FROM report_affected)  -- a request id in two records: once
    GROUP BY 1
), src AS (
    SELECT coalesce(source_account_id, '') AS k,
           string_agg(DISTINCT source_key(source_request_id, source_room), ', '
                      ORDER BY source_key(source_request_id, source_room)) AS exposed
    FROM exposures GROUP BY 1
)
SELECT a.account_id, a.cohort, a.responses_affected, a.responses_confirmed, a.responses_indeterminate,
       a.requests_exposed, a.requests_exposed_confirmed, coalesce(recv.received, '') AS received,
       coalesce(src.exposed, '') AS exposed
FROM accounts a LEFT JOIN recv ON recv.k = coalesce(a.account_id, '') LEFT JOIN src ON src.k = coalesce(a.account_id, '')
ORDER BY a.cohort LIKE '%customer%' DESC, a.account_id;

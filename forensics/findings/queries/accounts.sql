-- Per account, both directions: responses it received that held others' data, and its requests whose
-- data others attended (confirmed, or possibly: possible_sources of responses without page evidence).
-- The contract's accounts.csv. roles: which of these apply (received_confirmed, received_indeterminate,
-- exposed_confirmed, exposed_indeterminate, possibly_exposed, likely_exposed), so that no tier is lost in
-- a total. requests_likely_exposed: the possible sources in the allocator model's likely subset; empty
-- (unknown, never 0) where the bundle's evidence did not measure that subset good enough to print
-- (source_tier), or the account has no possible source. responses_same_account_only: responses whose
-- every exposure pair is of the account's own requests (cross_account false: no cross-tenant disclosure,
-- though it may matter between end users of one account); requests_same_account_only: its requests whose
-- data reached its own responses only; roles received_same_account_only / exposed_same_account_only say
-- so where that is all of it. The row without an account counts the unknown accounts: received
-- responses whose gateway record names none, and sources whose request no gateway record names
-- (account_requests: request_id 'room:<room>'); an empty and a missing account are one such row.
-- grain: account_id; reads: account_requests, request_cohort; params: none
CREATE OR REPLACE TABLE accounts AS
WITH recv AS (
    SELECT coalesce(account_id, '') AS account_id, count(*) AS responses_affected,
           count(*) FILTER (WHERE status = 'confirmed') AS responses_confirmed,
           count(*) FILTER (WHERE status = 'indeterminate') AS responses_indeterminate,
           count(*) FILTER (WHERE same_account_only) AS responses_same_account_only
    FROM account_requests WHERE role = 'received' GROUP BY 1
), src AS (
    SELECT coalesce(account_id, '') AS account_id, count(*) AS requests_exposed,
           count(*) FILTER (WHERE status = 'confirmed') AS requests_exposed_confirmed,
           count(*) FILTER (WHERE same_account_only) AS requests_same_account_only
    FROM account_requests WHERE role = 'exposed' GROUP BY 1
), poss AS (
    SELECT coalesce(account_id, '') AS account_id, count(*) AS requests_possibly_exposed,
           count(*) FILTER (WHERE status = 'likely') AS requests_likely_exposed
    FROM account_requests WHERE role = 'possibly_exposed' GROUP BY 1
), cohort AS (
    -- request_cohort has every gateway record (forensics.cohorts), with its account
    SELECT coalesce(account_id, '') AS account_id, string_agg(DISTINCT cohort, ';' ORDER BY cohort) AS cohort
    FROM request_cohort GROUP BY 1
)
SELECT nullif(account_id, '') AS account_id, cohort.cohort, coalesce(recv.responses_affected, 0) AS responses_affected,
       coalesce(src.requests_exposed, 0) AS requests_exposed,
       coalesce(recv.responses_confirmed, 0) AS responses_confirmed,
       coalesce(recv.responses_indeterminate, 0) AS responses_indeterminate,
       coalesce(src.requests_exposed_confirmed, 0) AS requests_exposed_confirmed,
       coalesce(poss.requests_possibly_exposed, 0) AS requests_possibly_exposed,
       CASE WHEN likely_tier() THEN coalesce(poss.requests_likely_exposed, 0) END AS requests_likely_exposed,
       coalesce(recv.responses_same_account_only, 0) AS responses_same_account_only,
       coalesce(src.requests_same_account_only, 0) AS requests_same_account_only,
       concat_ws(';', CASE WHEN recv.responses_confirmed > 0 THEN 'received_confirmed' END,
                 CASE WHEN recv.responses_indeterminate > 0 THEN 'received_indeterminate' END,
                 CASE WHEN src.requests_exposed_confirmed > 0 THEN 'exposed_confirmed' END,
                 CASE WHEN src.requests_exposed > src.requests_exposed_confirmed THEN 'exposed_indeterminate' END,
                 CASE WHEN poss.requests_possibly_exposed > 0 THEN 'possibly_exposed' END,
                 CASE WHEN poss.requests_likely_exposed > 0 THEN 'likely_exposed' END,
                 CASE WHEN recv.responses_affected > 0 AND recv.responses_affected = recv.responses_same_account_only
                      THEN 'received_same_account_only' END,
                 CASE WHEN src.requests_exposed > 0 AND src.requests_exposed = src.requests_same_account_only
                      AND coalesce(poss.requests_possibly_exposed, 0) = 0 THEN 'exposed_same_account_only' END) AS roles
FROM recv FULL JOIN src USING (account_id) FULL JOIN poss USING (account_id) LEFT JOIN cohort USING (account_id);

-- The mechanisms this run found, for the Nature section: per mechanism (stale: the placeholder path's
-- stale read; foreign_write: a late or foreign write into pages a response attended), evidence and
-- status, the affected responses and recipient accounts, in all cohorts and in the customer cohort.
-- A response that met both counts under each.
-- grain: mechanism, evidence, status; reads: report_affected; params: none
WITH m AS (
    SELECT DISTINCT request_id, account_id, cohort, evidence, status, unnest(string_split(kinds, ';')) AS mechanism
    FROM report_affected
)
SELECT mechanism, evidence, status, count(DISTINCT request_id) AS responses,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer_responses,
       count(DISTINCT account_id) FILTER (WHERE cohort = 'customer') AS customer_accounts
FROM m WHERE mechanism <> '' GROUP BY ALL ORDER BY mechanism, evidence, status;

-- Per cohort, before any exclusion is applied: requests, accounts, affected responses (as recipient,
-- by status) and source requests whose data reached any recipient (one whose request no gateway record
-- names: by its room, source_key, as a customer's, the safe side). A request id in two gateway records
-- that differ (gateway_repeats) counts once per cohort it is in.
-- grain: cohort; reads: request_cohort, gateway_repeats, report_affected, exposures; params: none
WITH rep AS (  -- the records beyond the first of each repeated request id, per cohort
    SELECT cohort, count(*) - count(DISTINCT request_id) AS extra
    FROM request_cohort SEMI JOIN gateway_repeats USING (request_id) GROUP BY cohort
), req AS (
    SELECT cohort, any_value(cohort_kind) AS kind, count(*) AS requests, count(DISTINCT account_id) AS accounts
    FROM request_cohort GROUP BY cohort
), recv AS (
    SELECT cohort, count(DISTINCT request_id) AS affected,
           count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS confirmed,
           count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS indeterminate,
           count(DISTINCT account_id) AS affected_accounts
    FROM report_affected GROUP BY cohort
), src AS (
    SELECT coalesce(source_cohort, 'customer') AS cohort, count(DISTINCT source_key(source_request_id, source_room)) AS sources,
           count(DISTINCT nullif(source_account_id, '')) AS source_accounts
    FROM exposures GROUP BY 1
)
SELECT cohort, coalesce(req.kind, 'customer') AS kind, coalesce(requests, 0) - coalesce(rep.extra, 0) AS requests,
       coalesce(accounts, 0) AS accounts, coalesce(affected, 0) AS affected, coalesce(confirmed, 0) AS confirmed,
       coalesce(indeterminate, 0) AS indeterminate, coalesce(affected_accounts, 0) AS affected_accounts,
       coalesce(sources, 0) AS sources, coalesce(source_accounts, 0) AS source_accounts
FROM req FULL JOIN recv USING (cohort) FULL JOIN src USING (cohort) LEFT JOIN rep USING (cohort)
ORDER BY cohort = 'customer' DESC, cohort;

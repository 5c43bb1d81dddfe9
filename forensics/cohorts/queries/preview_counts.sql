-- Preview: requests and accounts per cohort (customer first); a request id logged twice counts once.
-- grain: cohort; reads: request_cohort; params: none
SELECT cohort, any_value(cohort_kind) AS kind, count(DISTINCT request_id) AS requests,
       count(DISTINCT account_id) AS accounts
FROM request_cohort GROUP BY cohort ORDER BY cohort = 'customer' DESC, cohort;

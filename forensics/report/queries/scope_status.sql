-- Affected responses and accounts by recipient cohort, status and evidence.
-- grain: cohort, status, evidence; reads: report_affected; params: none
SELECT cohort, status, evidence, count(DISTINCT request_id) AS responses, count(DISTINCT account_id) AS accounts
FROM report_affected GROUP BY cohort, status, evidence ORDER BY cohort = 'customer' DESC, cohort, status, evidence;

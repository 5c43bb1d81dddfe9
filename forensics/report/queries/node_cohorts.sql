-- Affected responses per decode node and recipient cohort, for the summary's per-node chart.
-- grain: node, cohort; reads: report_affected; params: none
SELECT node, coalesce(cohort, 'unknown') AS cohort, count(DISTINCT request_id) AS responses
FROM report_affected GROUP BY ALL ORDER BY node, cohort;

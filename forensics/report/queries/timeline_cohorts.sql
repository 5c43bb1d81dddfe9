-- Affected responses per UTC time bucket (hour or day, by $bucket) and recipient cohort, for the
-- summary's timeline charts (the customer series first).
-- grain: bucket, cohort; reads: report_affected; params: bucket ('hour' | 'day')
SELECT date_trunc($bucket, affected_at) AS bucket, coalesce(cohort, 'unknown') AS cohort,
       count(DISTINCT request_id) AS responses
FROM report_affected GROUP BY ALL ORDER BY bucket, cohort;

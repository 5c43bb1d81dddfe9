-- Affected responses per UTC time bucket (hour or day, by $bucket) and status, for the timeline chart.
-- grain: bucket, status; reads: report_affected; params: bucket ('hour' | 'day')
SELECT date_trunc($bucket, affected_at) AS bucket, status, count(DISTINCT request_id) AS responses,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer
FROM report_affected GROUP BY ALL ORDER BY bucket, status;

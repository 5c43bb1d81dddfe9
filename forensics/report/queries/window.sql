-- First and last affected response, overall and for the customer cohort, and the span in hours.
-- grain: one row; reads: report_affected; params: none
SELECT min(affected_at) AS first_at, max(affected_at) AS last_at,
       min(affected_at) FILTER (WHERE cohort = 'customer') AS first_customer_at,
       max(affected_at) FILTER (WHERE cohort = 'customer') AS last_customer_at,
       (epoch(max(affected_at)) - epoch(min(affected_at))) / 3600.0 AS span_hours
FROM report_affected;

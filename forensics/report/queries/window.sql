-- First and last affected response, overall and for the customer cohort, and the span in hours. The
-- incident's window starts at the first customer response that may be affected (any status: an
-- indeterminate one may be the first truly exposed), with the first confirmed one beside it
-- (first_customer_confirmed_at, empty where none is). When each response counts is affected_times'.
-- grain: one row; reads: report_affected; params: none
SELECT min(affected_at) AS first_at, max(affected_at) AS last_at,
       min(affected_at) FILTER (WHERE cohort = 'customer') AS first_customer_at,
       min(affected_at) FILTER (WHERE cohort = 'customer' AND status = 'confirmed') AS first_customer_confirmed_at,
       max(affected_at) FILTER (WHERE cohort = 'customer') AS last_customer_at,
       (epoch(max(affected_at)) - epoch(min(affected_at))) / 3600.0 AS span_hours
FROM report_affected;

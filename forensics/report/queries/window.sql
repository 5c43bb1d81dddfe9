-- First and last affected response, overall and for the customer cohort, and the span in hours. The
-- incident's window starts at a confirmed response (spec section 7: an indeterminate one is never its
-- first moment); first_customer_unconfirmed_at: an earlier indeterminate customer response, said apart.
-- Without a confirmed customer response the window is the indeterminate ones' (the headline says "may").
-- grain: one row; reads: report_affected; params: none
WITH w AS (
    SELECT min(affected_at) FILTER (WHERE cohort = 'customer' AND status = 'confirmed') AS first_confirmed,
           min(affected_at) FILTER (WHERE cohort = 'customer') AS first_any
    FROM report_affected
)
SELECT min(affected_at) AS first_at, max(affected_at) AS last_at,
       coalesce(any_value(w.first_confirmed), any_value(w.first_any)) AS first_customer_at,
       CASE WHEN any_value(w.first_any) < any_value(w.first_confirmed) THEN any_value(w.first_any) END
           AS first_customer_unconfirmed_at,
       max(affected_at) FILTER (WHERE cohort = 'customer') AS last_customer_at,
       (epoch(max(affected_at)) - epoch(min(affected_at))) / 3600.0 AS span_hours
FROM report_affected, w;

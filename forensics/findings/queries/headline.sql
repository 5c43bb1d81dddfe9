-- The run's headline: affected responses (a request id in two gateway records counts once), by status
-- and for the customer cohort (confirmed and indeterminate apart: "may have been" is not "was"), those
-- whose account is unknown (no gateway record names them: counted apart, never as 0 accounts), and the
-- exposure pairs.
-- grain: one row; reads: affected_responses, exposures; params: none
SELECT count(DISTINCT request_id) AS affected,
       count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS confirmed,
       count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS indeterminate,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'confirmed') AS customer_confirmed,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'indeterminate')
         AS customer_indeterminate,
       count(DISTINCT request_id) FILTER (WHERE coalesce(account_id, '') = '') AS unknown_account,
       (SELECT count(*) FROM exposures) AS pairs
FROM affected_responses

-- The run's headline: affected responses (a request id in two gateway records counts once), by status
-- and for the customer cohort (confirmed and indeterminate apart: "may have been" is not "was"), those
-- whose account is unknown (no gateway record names them: counted apart, never as 0 accounts), and the
-- exposure pairs. possible_overlap: rows that may be the same response as another row (response_overlap: a
-- room no gateway record names, and records that name no room), so the distinct responses are at least
-- affected - possible_overlap, at most affected; customer_possible_overlap the same within the customer
-- cohort (such a room's row is counted customer, its account unknown: it may be a customer record's row,
-- or another cohort's).
-- grain: one row; reads: affected_responses, exposures, response_overlap; params: none
SELECT count(DISTINCT request_id) AS affected,
       count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS confirmed,
       count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS indeterminate,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'confirmed') AS customer_confirmed,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'indeterminate')
         AS customer_indeterminate,
       count(DISTINCT request_id) FILTER (WHERE coalesce(account_id, '') = '') AS unknown_account,
       (SELECT count(*) FROM exposures) AS pairs,
       (SELECT count(*) FROM response_overlap) AS possible_overlap,
       (SELECT count(*) FROM response_overlap WHERE cohort = 'customer') AS customer_possible_overlap
FROM affected_responses

-- The run's headline: affected responses (a request id in two gateway records counts once), by status
-- and for the customer cohort (confirmed and indeterminate apart: "may have been" is not "was"), those
-- whose account is unknown (no gateway record names them: counted apart, never as 0 accounts), and the
-- exposure pairs. Where rows may be the same response as another (response_overlap: a room no gateway
-- record names, and records that name no room), each count is a range (response_bounds): *_least the
-- least number of distinct responses, the count itself the most; possible_overlap (customer_possible_
-- overlap) the rows that may each be another row's response, affected less affected_least.
-- grain: one row; reads: affected_responses, exposures, response_bounds; params: none
WITH b AS (SELECT * FROM response_bounds WHERE scope = 'all'),
     c AS (SELECT * FROM response_bounds WHERE scope = 'customer')
SELECT count(DISTINCT request_id) AS affected,
       count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS confirmed,
       count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS indeterminate,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'confirmed') AS customer_confirmed,
       count(DISTINCT request_id) FILTER (WHERE cohort = 'customer' AND status = 'indeterminate')
         AS customer_indeterminate,
       count(DISTINCT request_id) FILTER (WHERE coalesce(account_id, '') = '') AS unknown_account,
       (SELECT count(*) FROM exposures) AS pairs,
       (SELECT responses - responses_least FROM b) AS possible_overlap,
       (SELECT responses - responses_least FROM c) AS customer_possible_overlap,
       (SELECT responses_least FROM b) AS affected_least,
       (SELECT confirmed_least FROM b) AS confirmed_least,
       (SELECT indeterminate_least FROM b) AS indeterminate_least,
       (SELECT responses_least FROM c) AS customer_least,
       (SELECT confirmed_least FROM c) AS customer_confirmed_least,
       (SELECT indeterminate_least FROM c) AS customer_indeterminate_least
FROM affected_responses

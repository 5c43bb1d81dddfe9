-- The requests each customer account is told about, one row per (account, role, request): the rows of
-- account_requests that a customer notification covers (a received response of the customer cohort; an
-- exposed or possibly exposed request of the customer cohort, or of unknown cohort: notifying too many is
-- the safe error). notifications.csv counts these rows; the notices and notices/requests.csv list them.
-- Kept in incident.duckdb, so `forensics notices` renders the notices again from the database alone.
-- grain: account_id, role, request_id; reads: account_requests; params: none
CREATE OR REPLACE TABLE notice_requests AS
SELECT account_id, role, request_id, status, same_account_only, first_at, last_at, request_at, node,
       recipient_cohorts
FROM account_requests
WHERE account_id IS NOT NULL AND (role = 'received' AND cohort = 'customer'
                                  OR role <> 'received' AND coalesce(cohort, 'customer') = 'customer')
ORDER BY account_id, role, request_id;

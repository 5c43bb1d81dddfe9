-- Preview: requests and accounts per cohort (customer first); a request id logged twice counts once.
-- grain: cohort; reads: request_cohort, gateway; params: none
SELECT c.cohort, any_value(c.cohort_kind) AS kind, count(DISTINCT c.request_id) AS requests, count(DISTINCT g.account_id) AS accounts
FROM request_cohort c JOIN gateway g ON g.file_id = c.file_id AND g.row = c.row
GROUP BY c.cohort ORDER BY c.cohort = 'customer' DESC, c.cohort;

-- Preview: per rule, the requests it won (first match wins) that would be customer without the rules
-- on client-controlled fields alone (otherwise_customer): what such a rule took out of the customer
-- cohort, in requests and accounts (the first five by id).
-- grain: rule; reads: request_cohort, otherwise_customer; params: none
SELECT r.rule, count(*) AS requests, count(DISTINCT r.account_id) AS accounts,
       list(DISTINCT r.account_id ORDER BY r.account_id)[:5] AS sample_accounts
FROM request_cohort r
JOIN otherwise_customer o USING (file_id, row)
WHERE r.rule IS NOT NULL
GROUP BY r.rule
ORDER BY r.rule;

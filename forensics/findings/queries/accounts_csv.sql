-- accounts.csv (spec section 6): per account, the responses it received others' data in and the requests whose data was exposed.
-- grain: account_id, cohort; reads: accounts; params: none
SELECT account_id, cohort, responses_affected, requests_exposed, responses_confirmed,
    responses_indeterminate, requests_exposed_confirmed, requests_possibly_exposed, requests_likely_exposed,
    responses_same_account_only, requests_same_account_only, roles
    FROM accounts ORDER BY account_id

-- The requests whose every exposure pair joins two requests of one account (cross_account false): side
-- recipient, a response that attended only its own account's data; side source, a request whose data
-- reached its own account's responses only. A request without a pair is in neither (unknown, not
-- same-account). Read by accounts.csv, the notifications and the headline, which name them apart.
-- grain: request_id, side; reads: exposures; params: none
CREATE OR REPLACE TABLE same_account_only AS
SELECT recipient_request_id AS request_id, 'recipient' AS side FROM exposures
GROUP BY 1 HAVING bool_and(cross_account = 'false')
UNION ALL
SELECT source_request_id, 'source' FROM exposures WHERE source_request_id <> ''
GROUP BY 1 HAVING bool_and(cross_account = 'false');

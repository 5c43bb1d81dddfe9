-- Possible sources, the source side without the pairs: every request that is a possible source of at
-- least one response (the pool's reachable requests and the late-write pairs' aborted ones), one row per
-- (node, source): what the accounts, the notifications and the bounds count.
-- grain: node, source room (or request); reads: possible_pool, possible_extra; params: none
CREATE OR REPLACE VIEW possible_source_requests AS
SELECT node, coalesce(request_id, '') AS source_request_id, account_id AS source_account_id, cohort AS source_cohort,
       room AS source_room
FROM possible_pool WHERE reachable
UNION
SELECT node, source_request_id, source_account_id, source_cohort, source_room FROM possible_extra;

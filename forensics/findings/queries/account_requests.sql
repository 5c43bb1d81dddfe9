-- Every request of every account in each role it has in the disclosure, one row per (account, role,
-- request): the one list the account counts (accounts.csv, notifications.csv) aggregate and the
-- per-account notices print, so a notice names exactly the requests its counts count.
-- role: received (a response of the account that attended others' data, or is indeterminate: status
-- confirmed or indeterminate as affected_responses says), exposed (a request whose data a response
-- attended by the page events: confirmed when any pair is), possibly_exposed (a possible source of a
-- response without page evidence: likely when the allocator model rates any of its pairs likely and the
-- bundle measured that subset good enough to print, likely_tier(); else possible).
-- same_account_only: every pair of the request joins it to its own account (same_account_only).
-- first_at / last_at: when the role happened (received: the moment the response counts as affected,
-- affected_at; exposed: its first pair's first exposure and its last pair's; possibly_exposed: unknown,
-- empty). request_at: the request's own gateway time (the
-- earliest, if its id repeats), for the account to recognise it. node: the decode node(s).
-- recipient_cohorts: the cohorts of the responses that attended an exposed request's data.
-- account_id is empty for received responses without an account (affected_responses keeps them) and for
-- exposed or possibly exposed requests whose account is unknown: a source no gateway record names is
-- kept, request_id 'room:<room>' (source_key), and counted in accounts.csv's row without an account;
-- no notice names it (notice_requests: a notice needs an account). Where the gateway join left such a
-- room open with candidate records (room_candidates), each candidate's account has the candidate request
-- as possibly_exposed (status possible): one of them is the source, which one is not in the evidence.
-- grain: account_id, role, request_id; reads: affected_responses, affected_times, exposures,
--        same_account_only, possible_source_requests, possible_modelled, gateway, room_candidates,
--        request_cohort; params: none
CREATE OR REPLACE TABLE account_requests AS
WITH candidate_sources AS (  -- the records a source room no gateway record names may be (room_candidates):
                             -- each may be the exposed request, so each is possibly exposed
    SELECT c.account_id, c.request_id, coalesce(rc.cohort, 'customer') AS cohort, s.node
    FROM (SELECT DISTINCT source_room, node FROM exposures WHERE source_request_id = ''
          UNION SELECT source_room, node FROM possible_source_requests WHERE source_request_id = '') s
    JOIN (SELECT DISTINCT room, request_id, account_id FROM room_candidates) c ON c.room = s.source_room
    LEFT JOIN (SELECT g.request_id, min(k.cohort) AS cohort FROM gateway g
               JOIN request_cohort k USING (file_id, row) GROUP BY 1) rc ON rc.request_id = c.request_id
), own AS (SELECT request_id, side FROM same_account_only),
recv AS (
    SELECT a.account_id, 'received' AS role, a.request_id, a.cohort, a.status,
           a.request_id IN (SELECT request_id FROM own WHERE side = 'recipient') AS same_account_only,
           t.affected_at AS first_at, t.affected_at AS last_at, t.request_ts AS request_at,
           a.decode_node AS node, NULL::VARCHAR AS recipient_cohorts
    FROM affected_responses a LEFT JOIN affected_times t USING (request_id)
), src AS (
    SELECT source_account_id AS account_id, 'exposed' AS role, source_key(source_request_id, source_room) AS request_id,
           -- the source's own cohort; the notifications count it as a customer's when unknown
           any_value(source_cohort ORDER BY source_cohort NULLS LAST) AS cohort,
           CASE WHEN bool_or(status = 'confirmed') THEN 'confirmed' ELSE 'indeterminate' END AS status,
           source_key(source_request_id, source_room) IN (SELECT request_id FROM own WHERE side = 'source')
               AS same_account_only,
           min(first_exposed_at) AS first_at, max(first_exposed_at) AS last_at, NULL::TIMESTAMPTZ AS request_at,
           string_agg(DISTINCT node, ';' ORDER BY node) AS node,
           string_agg(DISTINCT coalesce(recipient_cohort, 'unknown'), ';' ORDER BY coalesce(recipient_cohort, 'unknown'))
               AS recipient_cohorts
    FROM exposures GROUP BY source_account_id, source_key(source_request_id, source_room)
), poss AS (
    SELECT account_id, 'possibly_exposed' AS role, source_key(source_request_id, source_room) AS request_id,
           any_value(source_cohort ORDER BY source_cohort NULLS LAST) AS cohort,
           CASE WHEN bool_or(likely) AND likely_tier() THEN 'likely' ELSE 'possible' END AS status,
           false AS same_account_only, NULL::TIMESTAMPTZ AS first_at, NULL::TIMESTAMPTZ AS last_at,
           NULL::TIMESTAMPTZ AS request_at, string_agg(DISTINCT node, ';' ORDER BY node) AS node,
           NULL::VARCHAR AS recipient_cohorts
    FROM (SELECT source_account_id AS account_id, source_request_id, source_room, source_cohort, node, false AS likely
          FROM possible_source_requests
          UNION ALL
          SELECT source_account_id, source_request_id, source_room, source_cohort, node, is_likely(likelihood)
          FROM possible_modelled
          UNION ALL
          SELECT account_id, request_id, NULL, cohort, node, false FROM candidate_sources)
    GROUP BY account_id, source_key(source_request_id, source_room)
), rows AS (
    SELECT * FROM recv UNION ALL SELECT * FROM src UNION ALL SELECT * FROM poss
)
SELECT r.account_id, r.role, r.request_id, r.cohort, r.status, r.same_account_only, r.first_at, r.last_at,
       coalesce(r.request_at, g.ts) AS request_at, r.node, r.recipient_cohorts
FROM rows r
LEFT JOIN (SELECT request_id, min(ts) AS ts FROM gateway
           WHERE request_id IN (SELECT request_id FROM rows WHERE role <> 'received') GROUP BY 1) g USING (request_id)
ORDER BY r.account_id NULLS FIRST, r.role, r.request_id;

-- One row per customer account to notify, both directions: responses it received that held others'
-- data, and its requests whose data others attended (with the recipients' cohorts). The counts and id
-- lists aggregate notice_requests, which the per-account notices print, so the two agree.
-- Accounts whose requests are only possible sources (of responses without page evidence) are listed
-- too, with that count and how many of them the allocator model finds likely (empty where the likely
-- subset is not printed, source_tier): a notification list built from it may be too long, never too short.
-- responses_received_same_account_only: received responses whose every exposure pair is of the account's
-- own requests (its notice says so instead of "other customers' data"). received_confirmed_first_at /
-- _last_at: the account's own dates of its confirmed received responses (empty where none is confirmed),
-- beside received_first_at / _last_at, which count every response that may be affected.
-- grain: account_id; reads: notice_requests; params: none
WITH r AS (SELECT * FROM notice_requests), recv AS (
    SELECT account_id, count(*) AS responses_received,
           count(*) FILTER (WHERE same_account_only) AS responses_received_own_only,
           count(*) FILTER (WHERE status = 'confirmed') AS responses_received_confirmed,
           string_agg(request_id, ';' ORDER BY request_id) AS received_request_ids,
           min(first_at) AS received_first_at, max(last_at) AS received_last_at,
           min(first_at) FILTER (WHERE status = 'confirmed') AS received_confirmed_first_at,
           max(last_at) FILTER (WHERE status = 'confirmed') AS received_confirmed_last_at
    FROM r WHERE role = 'received' GROUP BY account_id
), src AS (
    SELECT account_id, count(DISTINCT request_id) AS requests_exposed,  -- a row per recipient cohort here
           count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS requests_exposed_confirmed,
           string_agg(DISTINCT request_id, ';' ORDER BY request_id) AS exposed_request_ids,
           min(first_at) AS exposed_first_at, max(last_at) AS exposed_last_at,
           string_agg(DISTINCT c, ';' ORDER BY c) AS recipient_cohorts
    FROM r, unnest(string_split(recipient_cohorts, ';')) AS u(c) WHERE role = 'exposed' GROUP BY account_id
), poss AS (
    SELECT account_id, count(*) AS requests_possibly_exposed,
           count(*) FILTER (WHERE status = 'likely') AS requests_likely_exposed
    FROM r WHERE role = 'possibly_exposed' GROUP BY account_id
)
SELECT account_id, coalesce(responses_received, 0) AS responses_received,
       coalesce(responses_received_own_only, 0) AS responses_received_same_account_only,
       coalesce(responses_received_confirmed, 0) AS responses_received_confirmed,
       coalesce(received_request_ids, '') AS received_request_ids, received_first_at, received_last_at,
       received_confirmed_first_at, received_confirmed_last_at,
       coalesce(requests_exposed, 0) AS requests_exposed,
       coalesce(requests_exposed_confirmed, 0) AS requests_exposed_confirmed,
       coalesce(exposed_request_ids, '') AS exposed_request_ids, exposed_first_at, exposed_last_at,
       coalesce(recipient_cohorts, '') AS recipient_cohorts,
       coalesce(requests_possibly_exposed, 0) AS requests_possibly_exposed,
       CASE WHEN likely_tier() THEN coalesce(requests_likely_exposed, 0) END AS requests_likely_exposed
FROM recv FULL JOIN src USING (account_id) FULL JOIN poss USING (account_id) ORDER BY account_id;

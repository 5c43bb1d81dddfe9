-- One row per customer account to notify, both directions: responses it received that held others'
-- data, and its requests whose data others attended (with the recipients' cohorts).
-- Accounts whose requests are only possible sources (of responses without page evidence) are listed
-- too, with that count and how many of them the allocator model finds likely (empty where the likely
-- subset is not printed, source_tier): a notification list built from it may be too long, never too short.
-- responses_received_same_account_only: received responses whose every exposure pair is of the account's
-- own requests (its notice says so instead of "other customers' data").
-- grain: account_id; reads: report_affected, exposures, same_account_only, possible_source_requests,
--        possible_modelled; params: none
WITH recv AS (
    SELECT account_id, count(DISTINCT request_id) AS responses_received,
           count(DISTINCT request_id) FILTER (WHERE request_id IN (SELECT request_id FROM same_account_only WHERE side = 'recipient'))
               AS responses_received_own_only,
           count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS responses_received_confirmed,
           string_agg(DISTINCT request_id, ';' ORDER BY request_id) AS received_request_ids,
           min(affected_at) AS received_first_at, max(affected_at) AS received_last_at
    FROM report_affected WHERE cohort = 'customer' AND account_id IS NOT NULL GROUP BY account_id
), src AS (
    SELECT source_account_id AS account_id, count(DISTINCT source_request_id) AS requests_exposed,
           count(DISTINCT source_request_id) FILTER (WHERE status = 'confirmed') AS requests_exposed_confirmed,
           string_agg(DISTINCT source_request_id, ';' ORDER BY source_request_id) AS exposed_request_ids,
           min(first_exposed_at) AS exposed_first_at, max(first_exposed_at) AS exposed_last_at,
           string_agg(DISTINCT coalesce(recipient_cohort, 'unknown'), ';' ORDER BY coalesce(recipient_cohort, 'unknown')) AS recipient_cohorts
    FROM exposures
    WHERE coalesce(source_cohort, 'customer') = 'customer' AND source_request_id <> '' AND source_account_id IS NOT NULL
    GROUP BY 1
), poss AS (
    SELECT account_id, count(DISTINCT source_request_id) AS requests_possibly_exposed,
           count(DISTINCT source_request_id) FILTER (WHERE likely) AS requests_likely_exposed
    FROM (SELECT source_account_id AS account_id, source_request_id, source_cohort, false AS likely
          FROM possible_source_requests
          UNION ALL
          SELECT source_account_id, source_request_id, source_cohort, is_likely(likelihood) FROM possible_modelled)
    WHERE coalesce(source_cohort, 'customer') = 'customer' AND source_request_id <> '' AND account_id IS NOT NULL
    GROUP BY 1
)
SELECT account_id, coalesce(responses_received, 0) AS responses_received,
       coalesce(responses_received_own_only, 0) AS responses_received_same_account_only,
       coalesce(responses_received_confirmed, 0) AS responses_received_confirmed,
       coalesce(received_request_ids, '') AS received_request_ids, received_first_at, received_last_at,
       coalesce(requests_exposed, 0) AS requests_exposed,
       coalesce(requests_exposed_confirmed, 0) AS requests_exposed_confirmed,
       coalesce(exposed_request_ids, '') AS exposed_request_ids, exposed_first_at, exposed_last_at,
       coalesce(recipient_cohorts, '') AS recipient_cohorts,
       coalesce(requests_possibly_exposed, 0) AS requests_possibly_exposed,
       CASE WHEN likely_tier() THEN coalesce(requests_likely_exposed, 0) END AS requests_likely_exposed
FROM recv FULL JOIN src USING (account_id) FULL JOIN poss USING (account_id) ORDER BY account_id;

-- Totals before and after exclusion: all requests and affected responses vs the customer cohort only.
-- Sources are never excluded: their count is whatever cohort received the data. A request id in two
-- gateway records that differ (gateway_repeats; exact repeats were rejected at ingest) counts once.
-- Where responses have no page evidence (evidence signature, or none: a node whose engine's lines no
-- logs-only rule reads), the confirmed sources are a lower bound:
-- unknown_source_responses counts those responses, and possible_* the customer requests and accounts
-- that the confirmed and the possible sources (possible_sources) reach together: the upper bound;
-- likely_*: the confirmed sources and the possible ones in the allocator model's likely subset (is_likely),
-- empty where that subset is not printed (source_tier: its measured precision too low, or nothing
-- calibrated it); likely_printed says which, likely_reason why. content_*: the customer requests whose
-- text a response without page evidence echoes (content_pairs), counted where content_tier measured the
-- matching good enough (content_printed), content_reason why or why not. same_account_only_after: customer
-- responses whose every exposure pair is of their own account (cross_account false), named apart.
-- unread_responses: of them, those of evidence none (no page events, no line read: indeterminate).
-- unknown_source_confirmed*: of the responses without page evidence, those the engine logs prove
-- affected (the rest may be). customer_accounts: the customer cohort's accounts, the bounds' context.
-- A source whose request no gateway record names (LiteLLM's failures: the time join found no single
-- room) is counted by its room (source_key), its cohort customer (the safe side), its account unknown:
-- the *_accounts count the known accounts, the *_unknown the sources whose account is unknown (each may
-- be another account). No bound drops one.
-- unknown_account_after: customer responses whose account is unknown (no gateway record names them:
-- their signature or page evidence is in the engine logs alone), counted apart, never as 0 accounts;
-- accounts_after counts the known accounts only.
-- overlap_before, overlap_after: rows that may each be the same response as another row (response_overlap:
-- a room no gateway record names, and records that name no room): affected_* less these is the least
-- number of distinct responses, affected_* the most; confirmed_least_*, indeterminate_least_*: the least
-- of each status (response_bounds: the confirmed and indeterminate rows the most).
-- The bound in context: customer_accounts (the customer cohort's known accounts in the gateway log), which
-- report/data.py bound_context sets beside possible_customer_source_accounts (and requests_after beside
-- possible_customer_sources): a bound of nearly everything says the logs cannot narrow it.
-- grain: one row; reads: request_cohort, gateway_repeats, report_affected, exposures, possible_source_requests,
--        possible_modelled, possible_windows, possible_extra, source_tier, content_pairs, content_tier,
--        same_account_only, response_bounds;
--        params: none
WITH rep AS (SELECT request_id, cohort FROM request_cohort SEMI JOIN gateway_repeats USING (request_id)),
totals AS (
SELECT (SELECT count(*) FROM request_cohort) - (SELECT count(*) - count(DISTINCT request_id) FROM rep) AS requests_before,
       (SELECT count(*) FROM request_cohort WHERE cohort = 'customer')
         - (SELECT count(*) - count(DISTINCT request_id) FROM rep WHERE cohort = 'customer') AS requests_after,
       (SELECT count(DISTINCT request_id) FROM report_affected) AS affected_before,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE cohort = 'customer') AS affected_after,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE status = 'confirmed') AS confirmed_before,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE status = 'confirmed' AND cohort = 'customer')
         AS confirmed_after,
       (SELECT responses - responses_least FROM response_bounds WHERE scope = 'all') AS overlap_before,
       (SELECT responses - responses_least FROM response_bounds WHERE scope = 'customer') AS overlap_after,
       (SELECT confirmed_least FROM response_bounds WHERE scope = 'all') AS confirmed_least_before,
       (SELECT confirmed_least FROM response_bounds WHERE scope = 'customer') AS confirmed_least_after,
       (SELECT indeterminate_least FROM response_bounds WHERE scope = 'all') AS indeterminate_least_before,
       (SELECT indeterminate_least FROM response_bounds WHERE scope = 'customer') AS indeterminate_least_after,
       (SELECT count(DISTINCT account_id) FROM report_affected) AS accounts_before,
       (SELECT count(DISTINCT account_id) FROM report_affected WHERE cohort = 'customer') AS accounts_after,
       (SELECT count(DISTINCT request_id) FROM report_affected
         WHERE cohort = 'customer' AND coalesce(account_id, '') = '') AS unknown_account_after,
       (SELECT count(DISTINCT nullif(account_id, '')) FROM request_cohort WHERE cohort = 'customer') AS customer_accounts,
       (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM exposures) AS sources,
       (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM exposures
         WHERE coalesce(source_cohort, 'customer') = 'customer') AS customer_sources,
       (SELECT count(DISTINCT nullif(source_account_id, '')) FROM exposures
         WHERE coalesce(source_cohort, 'customer') = 'customer') AS customer_source_accounts,
       (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM exposures
         WHERE coalesce(source_cohort, 'customer') = 'customer' AND coalesce(source_account_id, '') = '')
         AS customer_source_unknown,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE evidence IN ('signature', 'none')) AS unknown_source_responses,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE evidence = 'none') AS unread_responses,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE evidence IN ('signature', 'none') AND cohort = 'customer')
         AS unknown_source_customer_responses,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE evidence IN ('signature', 'none') AND status = 'confirmed')
         AS unknown_source_confirmed,
       (SELECT count(DISTINCT request_id) FROM report_affected
         WHERE evidence IN ('signature', 'none') AND status = 'confirmed' AND cohort = 'customer') AS unknown_source_customer_confirmed,
       (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM (
           SELECT source_request_id, source_room, source_cohort FROM exposures
           UNION ALL SELECT source_request_id, source_room, source_cohort FROM possible_source_requests)
         WHERE coalesce(source_cohort, 'customer') = 'customer') AS possible_customer_sources,
       (SELECT count(DISTINCT nullif(source_account_id, '')) FROM (
           SELECT source_account_id, source_cohort FROM exposures
           UNION ALL SELECT source_account_id, source_cohort FROM possible_source_requests)
         WHERE coalesce(source_cohort, 'customer') = 'customer') AS possible_customer_source_accounts,
       (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM (
           SELECT source_request_id, source_room, source_account_id, source_cohort FROM exposures
           UNION ALL SELECT source_request_id, source_room, source_account_id, source_cohort FROM possible_source_requests)
         WHERE coalesce(source_cohort, 'customer') = 'customer' AND coalesce(source_account_id, '') = '')
         AS possible_customer_source_unknown,
       CASE WHEN likely_tier() THEN (SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM (
           SELECT source_request_id, source_room, source_cohort FROM exposures
           UNION ALL SELECT source_request_id, source_room, source_cohort FROM possible_modelled WHERE is_likely(likelihood))
         WHERE coalesce(source_cohort, 'customer') = 'customer') END AS likely_customer_sources,
       CASE WHEN likely_tier() THEN (SELECT count(DISTINCT nullif(source_account_id, '')) FROM (
           SELECT source_account_id, source_cohort FROM exposures
           UNION ALL SELECT source_account_id, source_cohort FROM possible_modelled WHERE is_likely(likelihood))
         WHERE coalesce(source_cohort, 'customer') = 'customer') END AS likely_customer_source_accounts,
       (SELECT count(*) FROM possible_modelled WHERE is_likely(likelihood)) AS likely_pairs,
       (SELECT coalesce(sum(sources), 0) FROM possible_windows) + (SELECT count(*) FROM possible_extra) AS possible_pairs,
       (SELECT count(DISTINCT c.source_request_id) FROM content_pairs c
         JOIN request_cohort q ON q.request_id = c.source_request_id AND q.cohort = 'customer') AS content_customer_sources,
       (SELECT count(DISTINCT q.account_id) FROM content_pairs c
         JOIN request_cohort q ON q.request_id = c.source_request_id AND q.cohort = 'customer') AS content_customer_source_accounts,
       (SELECT printed FROM content_tier) AS content_printed,
       (SELECT reason FROM content_tier) AS content_reason,
       (SELECT count(DISTINCT request_id) FROM report_affected WHERE cohort = 'customer' AND request_id IN (
           SELECT request_id FROM same_account_only WHERE side = 'recipient'))
         AS same_account_only_after,
       coalesce(likely_tier(), false) AS likely_printed,
       (SELECT reason FROM source_tier) AS likely_reason,
       (SELECT measured_precision FROM source_tier) AS likely_precision,
       (SELECT measured_recall FROM source_tier) AS likely_recall
)
SELECT * FROM totals;

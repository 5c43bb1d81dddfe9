-- Entry view: whose data reached which account. One row per (recipient account and cohort, source
-- account and cohort, status): confirmed and indeterminate pairs from the page evidence and the
-- engine-log signature, and possible pairs (responses without page evidence: a superset, with the
-- allocator model's best likelihood). Slots and times are unknown (empty, never 0) for possible pairs.
--   SELECT * FROM exposure_by_account WHERE recipient_account_id = 'acct-0becd7';
-- grain: recipient_account_id, recipient_cohort, source_account_id, source_cohort, status; reads: exposures, possible_sources; params: none
SELECT recipient_account_id, recipient_cohort, source_account_id, source_cohort, status,
       count(DISTINCT recipient_request_id) AS recipient_request_count,
       count(DISTINCT source_request_id) AS source_request_count,
       sum(slots) AS slots, min(first_exposed_at) AS first_exposed_at, max(first_exposed_at) AS last_exposed_at,
       max(likelihood) AS max_likelihood, string_agg(DISTINCT node, ' ' ORDER BY node) AS nodes
FROM (
    SELECT recipient_account_id, recipient_cohort, source_account_id, source_cohort, status,
           recipient_request_id, source_request_id, slots, first_exposed_at, NULL::DOUBLE AS likelihood, node
    FROM internal.exposures
    UNION ALL
    SELECT recipient_account_id, recipient_cohort, source_account_id, source_cohort, 'possible',
           recipient_request_id, source_request_id, NULL, NULL, likelihood, node
    FROM internal.possible_sources
)
GROUP BY ALL

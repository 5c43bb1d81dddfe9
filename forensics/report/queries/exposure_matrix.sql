-- Exposure matrix: recipient cohort x source cohort (sources of unknown request: cohort 'unknown', each
-- counted by its room: source_key).
-- grain: recipient_cohort, source_cohort; reads: exposures; params: none
SELECT coalesce(recipient_cohort, 'unknown') AS recipient_cohort, coalesce(source_cohort, 'unknown') AS source_cohort,
       count(*) AS pairs, count(DISTINCT recipient_request_id) AS recipients,
       count(DISTINCT source_key(source_request_id, source_room)) AS sources,
       count(*) FILTER (WHERE status = 'confirmed') AS confirmed_pairs, sum(slots)::BIGINT AS slots
FROM exposures GROUP BY ALL ORDER BY recipient_cohort, source_cohort;

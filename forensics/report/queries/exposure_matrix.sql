-- Exposure matrix: recipient cohort x source cohort (sources of unknown request: 'unknown').
-- grain: recipient_cohort, source_cohort; reads: exposures; params: none
SELECT coalesce(recipient_cohort, 'unknown') AS recipient_cohort, coalesce(source_cohort, 'unknown') AS source_cohort,
       count(*) AS pairs, count(DISTINCT recipient_request_id) AS recipients,
       count(DISTINCT CASE WHEN source_request_id <> '' THEN source_request_id END) AS sources,
       count(*) FILTER (WHERE status = 'confirmed') AS confirmed_pairs, sum(slots)::BIGINT AS slots
FROM exposures GROUP BY ALL ORDER BY recipient_cohort, source_cohort;

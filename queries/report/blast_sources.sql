-- Source requests whose data another request attended, with to whom it went (cohort by cohort).
-- Kept as a table: blast_sources.csv has every row, the report the first ones and the count.
-- grain: source_request_id; reads: exposures, gateway; params: none
CREATE OR REPLACE TEMP TABLE report_sources AS
SELECT e.source_request_id, any_value(e.source_account_id) AS source_account_id,
       any_value(coalesce(e.source_cohort, 'customer')) AS source_cohort,
       CASE WHEN bool_or(e.status = 'confirmed') THEN 'confirmed' ELSE 'indeterminate' END AS status,
       count(DISTINCT e.recipient_request_id) AS recipients,
       string_agg(DISTINCT e.recipient_request_id, ';' ORDER BY e.recipient_request_id) AS recipient_request_ids,
       string_agg(DISTINCT coalesce(e.recipient_cohort, 'unknown'), ';' ORDER BY coalesce(e.recipient_cohort, 'unknown')) AS recipient_cohorts,
       string_agg(DISTINCT e.kind, ';' ORDER BY e.kind) AS kinds, sum(e.slots)::BIGINT AS slots,
       min(e.first_exposed_at) AS first_exposed_at, max(e.first_exposed_at) AS last_exposed_at
FROM exposures e WHERE e.source_request_id <> ''
GROUP BY e.source_request_id;

-- Source requests whose data another request attended, with to whom it went (cohort by cohort). A
-- source no gateway record names (its request id empty, its account unknown) is listed by its room
-- (source_key), never left out.
-- Kept as a table: blast_sources.csv has every row, the report the first ones and the count.
-- grain: source_request_id; reads: exposures, gateway; params: none
CREATE OR REPLACE TEMP TABLE report_sources AS
SELECT source_request_id, source_room, source_account_id, source_cohort, status, len(rids) AS recipients,
       array_to_string(rids, ';') AS recipient_request_ids, recipient_cohorts, kinds, slots,
       first_exposed_at, last_exposed_at
FROM (  -- sorted distinct lists, not string_agg(DISTINCT .. ORDER BY ..): 2.5x faster over 1M sources
    SELECT any_value(e.source_request_id) AS source_request_id, min(e.source_room) AS source_room,
           any_value(e.source_account_id) AS source_account_id,
           any_value(coalesce(e.source_cohort, 'customer')) AS source_cohort,
           CASE WHEN bool_or(e.status = 'confirmed') THEN 'confirmed' ELSE 'indeterminate' END AS status,
           list_sort(list_distinct(list(e.recipient_request_id))) AS rids,
           array_to_string(list_sort(list_distinct(list(coalesce(e.recipient_cohort, 'unknown')))), ';') AS recipient_cohorts,
           array_to_string(list_sort(list_distinct(list(e.kind))), ';') AS kinds, sum(e.slots)::BIGINT AS slots,
           min(e.first_exposed_at) AS first_exposed_at, max(e.first_exposed_at) AS last_exposed_at
    FROM exposures e
    GROUP BY source_key(e.source_request_id, e.source_room));

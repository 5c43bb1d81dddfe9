-- The slot ranges the report prints per response: the first $max_ranges (stale first, by slot).
-- grain: request_id, rn; reads: prov_merged; params: max_ranges
SELECT * FROM prov_merged WHERE rn <= $max_ranges ORDER BY request_id, rn;

-- Preview: sample request ids a single rule matched (request_cohort labelled with that rule alone).
-- grain: request_id; reads: request_cohort; params: n
SELECT DISTINCT request_id FROM request_cohort WHERE rule IS NOT NULL ORDER BY request_id LIMIT $n;

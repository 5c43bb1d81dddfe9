-- Preview: sample request ids a rule won (first match wins, all rules applied).
-- grain: request_id; reads: request_cohort; params: label, n
SELECT DISTINCT request_id FROM request_cohort WHERE rule = $label ORDER BY request_id LIMIT $n;

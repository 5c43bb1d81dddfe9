-- Per exclusion rule (match table): requests it matched, requests it won (first match wins), and of
-- those won, affected responses that leave the customer count, with the count before and after.
-- grain: rule_id; reads: cohort_rules, request_cohort, report_affected; params: none
WITH won AS (
    SELECT c.rule, count(DISTINCT a.request_id) AS affected_won,
           count(DISTINCT a.request_id) FILTER (WHERE a.status = 'confirmed') AS confirmed_won
    FROM request_cohort c JOIN report_affected a USING (request_id) WHERE c.rule IS NOT NULL GROUP BY c.rule
)
SELECT r.rule_id, r.cohort, r.kind, r.label, r.match, r.matched, r.won,
       coalesce(w.affected_won, 0) AS affected_won, coalesce(w.confirmed_won, 0) AS confirmed_won
FROM cohort_rules r LEFT JOIN won w ON w.rule = r.label ORDER BY r.rule_id;

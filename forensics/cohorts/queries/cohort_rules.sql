-- Each exclusion rule with the records it matches (matched) and those it decides, being the first rule
-- that matches them (won): the manifest's and the report's per-rule counts.
-- grain: exclusion rule; reads: rule_defs, rule_hits, request_cohort; params: none
-- scratch: rule_hits
CREATE OR REPLACE TABLE cohort_rules AS
SELECT d.*, coalesce(c.matched, 0) AS matched, (SELECT count(*) FROM request_cohort r WHERE r.rule = d.label) AS won
FROM rule_defs d
LEFT JOIN (SELECT rule_id, count(*) AS matched FROM (SELECT unnest(rules) AS rule_id FROM rule_hits) GROUP BY 1) c
  USING (rule_id)
ORDER BY rule_id

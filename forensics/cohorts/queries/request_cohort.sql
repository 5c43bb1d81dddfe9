-- Every gateway record's cohort: the first rule (in exclusions.toml's order) that matches it
-- (rule_hits.rules, the matching rules' ids in order), else customer.
-- grain: gateway record; reads: gateway, rule_hits, rule_defs; params: none
CREATE OR REPLACE TABLE request_cohort AS
SELECT g.request_id, g.file_id, g.row, coalesce(d.cohort, 'customer') AS cohort,
       coalesce(d.kind, 'customer') AS cohort_kind, d.label AS rule, g.account_id
FROM gateway g
LEFT JOIN (SELECT file_id, row, rules[1] AS rule_id FROM rule_hits) h USING (file_id, row)
LEFT JOIN rule_defs d USING (rule_id)

-- Preview: per rule (match table, in file order) requests matched and won.
-- grain: rule_id; reads: cohort_rules; params: none
SELECT rule_id, cohort, kind, label, match, matched, won FROM cohort_rules ORDER BY rule_id;

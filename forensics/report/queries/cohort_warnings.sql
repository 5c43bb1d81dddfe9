-- The exclusion rules on client-controlled fields alone that moved otherwise-customer requests out of the
-- customer cohort (forensics.cohorts.preview.store_warnings, run by investigate): one message per rule,
-- for part 1 beside the cohort counts.
-- grain: rule; reads: cohort_warnings; params: none
SELECT rule, message FROM cohort_warnings ORDER BY rule;

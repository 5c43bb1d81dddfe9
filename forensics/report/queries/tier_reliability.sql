-- Each indeterminate tier of responses without page evidence with its measured reliability (the
-- findings' tier_reliability): what the report, the brief and the notices say beside the responses the
-- engine logs alone leave indeterminate; and how many responses with page evidence are indeterminate
-- (after lost records, or an order the clocks cannot settle), which no tier measures, and how many
-- without it are (a tier's figure speaks for its own ones only).
-- grain: tier; reads: tier_reliability, affected_responses; params: none
SELECT tier, what, indeterminate, cases, affected, share, basis,
       (SELECT count(*) FROM affected_responses WHERE status = 'indeterminate' AND evidence = 'pages') AS pages_indeterminate,
       (SELECT count(*) FROM affected_responses WHERE status = 'indeterminate' AND evidence = 'signature') AS logs_indeterminate
FROM tier_reliability ORDER BY tier;

-- Each indeterminate tier of responses without page evidence with its measured reliability (the
-- findings' tier_reliability): what the report, the brief and the notices say beside the responses the
-- engine logs alone leave indeterminate; and how many responses with page evidence are indeterminate
-- (after lost records, or an order the clocks cannot settle), which no tier measures.
-- grain: tier; reads: tier_reliability, affected_responses; params: none
SELECT tier, what, indeterminate, cases, affected, share, basis,
       (SELECT count(*) FROM affected_responses WHERE status = 'indeterminate' AND evidence = 'pages') AS pages_indeterminate
FROM tier_reliability ORDER BY tier;

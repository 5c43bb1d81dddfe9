-- Step 5 of gateway_join: drops join_hits
-- grain: n/a; reads: nothing; params: none
DROP TABLE join_hits;

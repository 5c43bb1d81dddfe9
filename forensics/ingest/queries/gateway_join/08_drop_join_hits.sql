-- Step 8 of gateway_join: drops join_hits
-- grain: no rows: drops join_hits, this step's scratch; reads: nothing; params: none
DROP TABLE join_hits;

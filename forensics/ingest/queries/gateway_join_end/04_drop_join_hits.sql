-- Step 4 of gateway_join_end: drops join_hits
-- grain: no rows: drops join_hits, this step's scratch; reads: nothing; params: none
DROP TABLE join_hits;

-- Step 7 of gateway_join_end: drops time_hits
-- grain: no rows: drops time_hits, this step's scratch; reads: nothing; params: none
DROP TABLE time_hits;

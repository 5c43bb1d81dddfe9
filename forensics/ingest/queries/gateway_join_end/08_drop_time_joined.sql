-- Step 8 of gateway_join_end: drops time_joined
-- grain: no rows: drops time_joined, this step's scratch; reads: nothing; params: none
DROP TABLE time_joined;

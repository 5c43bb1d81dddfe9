-- Step 11 of gateway_join_end: drops assign_open
-- grain: no rows: drops assign_open, this step's scratch; reads: nothing; params: none
DROP TABLE assign_open;

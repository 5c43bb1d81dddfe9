-- Step 10 of gateway_join_end: drops gateway_assigned
-- grain: no rows: drops gateway_assigned, this step's scratch; reads: nothing; params: none
DROP TABLE gateway_assigned;

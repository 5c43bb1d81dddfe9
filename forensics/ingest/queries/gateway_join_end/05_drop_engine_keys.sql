-- Step 5 of gateway_join_end: drops engine_keys
-- grain: no rows: drops engine_keys, this step's scratch; reads: nothing; params: none
DROP TABLE engine_keys;

-- Step 9 of gateway_join: drops engine_keys
-- grain: no rows: drops engine_keys, this step's scratch; reads: nothing; params: none
DROP TABLE engine_keys;

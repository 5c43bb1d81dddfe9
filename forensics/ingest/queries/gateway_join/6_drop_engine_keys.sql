-- Step 6 of gateway_join: drops engine_keys
-- grain: n/a; reads: nothing; params: none
DROP TABLE engine_keys;

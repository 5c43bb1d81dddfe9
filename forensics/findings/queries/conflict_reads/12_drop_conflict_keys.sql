-- Step 12 of conflict_reads: drops conflict_keys.
-- grain: no rows: drops conflict_keys, this step's scratch; reads: nothing; params: none
DROP TABLE conflict_keys;

-- Step 12 of conflict_reads: drops conflict_keys.
-- grain: n/a (drops conflict_keys); reads: nothing; params: none
DROP TABLE conflict_keys;

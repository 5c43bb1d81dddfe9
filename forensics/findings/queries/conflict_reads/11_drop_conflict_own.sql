-- Step 11 of conflict_reads: drops conflict_own.
-- grain: n/a (drops conflict_own); reads: nothing; params: none
DROP TABLE conflict_own;

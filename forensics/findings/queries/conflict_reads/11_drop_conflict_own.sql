-- Step 11 of conflict_reads: drops conflict_own.
-- grain: no rows: drops conflict_own, this step's scratch; reads: nothing; params: none
DROP TABLE conflict_own;

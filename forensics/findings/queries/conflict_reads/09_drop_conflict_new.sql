-- Step 9 of conflict_reads: drops conflict_new.
-- grain: n/a (drops conflict_new); reads: nothing; params: none
DROP TABLE conflict_new;

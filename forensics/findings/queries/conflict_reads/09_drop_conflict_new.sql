-- Step 9 of conflict_reads: drops conflict_new.
-- grain: no rows: drops conflict_new, this step's scratch; reads: nothing; params: none
DROP TABLE conflict_new;

-- Step 10 of conflict_reads: drops conflict_prov.
-- grain: no rows: drops conflict_prov, this step's scratch; reads: nothing; params: none
DROP TABLE conflict_prov;

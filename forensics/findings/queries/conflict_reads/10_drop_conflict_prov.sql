-- Step 10 of conflict_reads: drops conflict_prov.
-- grain: n/a (drops conflict_prov); reads: nothing; params: none
DROP TABLE conflict_prov;

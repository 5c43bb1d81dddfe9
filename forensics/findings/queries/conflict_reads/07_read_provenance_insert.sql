-- Step 7 of conflict_reads: inserts into read_provenance.
-- grain: conflict_new row (inserted into read_provenance); reads: conflict_new; params: none
INSERT INTO read_provenance SELECT * FROM conflict_new;

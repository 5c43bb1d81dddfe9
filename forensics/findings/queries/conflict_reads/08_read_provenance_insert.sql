-- Step 8 of conflict_reads: inserts into read_provenance.
-- grain: conflict_own row of a read of another room's data (inserted into read_provenance); reads: conflict_own; params: none
INSERT INTO read_provenance SELECT * EXCLUDE (reason) FROM conflict_own WHERE w_room <> room;

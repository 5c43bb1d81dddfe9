-- Step 6 of conflict_reads: deletes from read_provenance.
-- grain: read_provenance row a conflict cuts (deleted: conflict_new holds its pieces); reads: read_provenance, conflict_prov; params: none
DELETE FROM read_provenance WHERE rowid IN (SELECT prov_row FROM conflict_prov);

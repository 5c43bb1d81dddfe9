-- Step 2 of transfer_landing: drops landing_seqs.
-- grain: no rows: drops landing_seqs (landing_seqs made it for this step); reads: nothing; params: none
DROP TABLE landing_seqs;

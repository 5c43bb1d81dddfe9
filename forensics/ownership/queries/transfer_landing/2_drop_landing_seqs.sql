-- Step 2 of transfer_landing: drops landing_seqs.
-- grain: n/a (drops landing_seqs); reads: nothing; params: none
DROP TABLE landing_seqs;

-- Step 4 of landing_ambiguous: drops landing_window_hits.
-- grain: n/a (drops landing_window_hits); reads: nothing; params: none
DROP TABLE landing_window_hits;

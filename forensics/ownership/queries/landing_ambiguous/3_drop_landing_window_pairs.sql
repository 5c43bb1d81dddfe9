-- Step 3 of landing_ambiguous: drops landing_window_pairs.
-- grain: n/a (drops landing_window_pairs); reads: nothing; params: none
DROP TABLE landing_window_pairs;

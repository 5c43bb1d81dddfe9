-- Step 3 of landing_ambiguous: drops landing_window_pairs.
-- grain: no rows: drops landing_window_pairs, this step's scratch; reads: nothing; params: none
DROP TABLE landing_window_pairs;

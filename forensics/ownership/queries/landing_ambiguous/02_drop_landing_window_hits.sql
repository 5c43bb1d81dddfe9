-- Step 2 of landing_ambiguous: drops landing_window_hits.
-- grain: no rows: drops landing_window_hits (window_hits made it for this step); reads: nothing; params: none
DROP TABLE landing_window_hits;

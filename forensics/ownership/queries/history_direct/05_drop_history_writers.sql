-- Step 5 of history_direct: drops history_writers.
-- grain: no rows: drops history_writers, this step's scratch; reads: nothing; params: none
DROP TABLE history_writers;

-- Step 5 of history_direct: drops history_writers.
-- grain: n/a (drops history_writers); reads: nothing; params: none
DROP TABLE history_writers;

-- Step 3 of history_search: makes history_open.
-- grain: item, s (all of every item, until the rounds find writers); reads: history_items; params: none
CREATE OR REPLACE TABLE history_open AS SELECT item, s, e FROM history_items;

-- Step 3 of history_search: makes history_open.
-- grain: history_open; reads: history_items; params: none
CREATE OR REPLACE TABLE history_open AS SELECT item, s, e FROM history_items;

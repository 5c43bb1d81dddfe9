-- Step 5 of history_direct: makes history_open.
-- grain: item, s (a part of an item no write reached); reads: history_parts; params: none
CREATE OR REPLACE TABLE history_open AS
SELECT item, s, e FROM history_parts WHERE w_k IS NULL;

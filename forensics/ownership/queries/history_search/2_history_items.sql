-- Step 2 of history_search: makes history_items.
-- grain: history_items; reads: history_writes; params: none
CREATE OR REPLACE TABLE history_items AS
SELECT i.* REPLACE (coalesce(w.widx + 1, 0) AS qidx)
FROM history_items i ASOF LEFT JOIN history_writes w ON w.node = i.node AND w.k < i.k;

-- Step 2 of history_search: makes history_items.
-- grain: item (with qidx, the index of its last earlier write); reads: history_writes; params: none
CREATE OR REPLACE TABLE history_items AS
SELECT i.* REPLACE (coalesce(w.widx + 1, 0) AS qidx)
FROM history_items i ASOF LEFT JOIN history_writes w ON w.node = i.node AND w.k < i.k;

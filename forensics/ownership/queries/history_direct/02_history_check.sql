-- Step 2 of history_direct: makes history_check.
-- grain: history item its parts do not cover (none when the screen and the items agree); reads: history_items, history_parts; params: none
CREATE OR REPLACE TEMP TABLE history_check AS
SELECT i.item, i.e - i.s AS want, coalesce(c.got, 0) AS got
FROM history_items i LEFT JOIN (SELECT item, sum(e - s) AS got FROM history_parts GROUP BY item) c USING (item)
WHERE coalesce(c.got, 0) <> i.e - i.s;

-- Step 4 of history_direct: makes history_found.
-- grain: item, s (a part of an item, with its last writer); reads: history_parts, history_writers; params: none
CREATE OR REPLACE TABLE history_found AS
SELECT p.item, p.s, p.e, w.room AS w_room, w.k AS w_k, w.ambiguous AS w_amb, w.ts AS w_ts
FROM history_parts p JOIN history_writers w ON w.node = p.node AND w.k = p.w_k;

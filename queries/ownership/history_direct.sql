-- The last-writer lookup when the screening pass ran (forensics.screen): it walked every write of
-- the node in order and recorded, for each read it flagged, the last write over every run of the
-- read's slots (screen_prov). Items are defined as in history_items.sql; each item's pieces are cut
-- from those runs. Every item is covered by the runs of its read (a screened read is flagged
-- whenever the replay makes an item of it); history_check verifies it.
-- grain: item (history_items); reads: room_state, screen_prov, timeline, node_index; params: none
CREATE OR REPLACE TABLE history_items AS
WITH r AS (
    SELECT node, room, op, k, pos, ts, a_k, f_k, seg_start AS s, seg_end AS e
    FROM room_state
    WHERE op IN ('read', 'share') AND NOT coalesce(w_k > a_k, false) AND NOT coalesce(i_k > a_k, false)
)
SELECT x.base + row_number() OVER (PARTITION BY r.node ORDER BY r.k, r.room, r.s) AS item, r.*,
       NULL::BIGINT AS qidx
FROM r JOIN node_index x USING (node);

CREATE OR REPLACE TEMP TABLE history_parts AS
SELECT i.item, i.node, greatest(p.s, i.s) AS s, least(p.e, i.e) AS e, p.w_k
FROM history_items i JOIN screen_prov p ON p.node = i.node AND p.k = i.k AND p.s < i.e AND p.e > i.s;

CREATE OR REPLACE TEMP TABLE history_check AS
SELECT i.item, i.e - i.s AS want, coalesce(c.got, 0) AS got
FROM history_items i LEFT JOIN (SELECT item, sum(e - s) AS got FROM history_parts GROUP BY item) c USING (item)
WHERE coalesce(c.got, 0) <> i.e - i.s;

CREATE OR REPLACE TABLE history_found AS
SELECT p.item, p.s, p.e, w.room AS w_room, w.k AS w_k, w.ambiguous AS w_amb, w.ts AS w_ts
FROM history_parts p JOIN timeline w ON w.node = p.node AND w.k = p.w_k;

CREATE OR REPLACE TABLE history_open AS
SELECT item, s, e FROM history_parts WHERE w_k IS NULL;

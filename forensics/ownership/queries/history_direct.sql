-- The last-writer lookup when the screening pass ran (forensics.screen): it walked every write of
-- the node in order and recorded, for each read it flagged, the last write over every run of the
-- read's slots (screen_prov). Each item (history_items.sql) is cut into pieces along those runs.
-- Every item is covered by the runs of its read (a screened read is flagged whenever the replay makes
-- an item of it); history_check verifies it.
-- grain: item piece; reads: history_items, screen_prov, page_events, timeline_xfer; params: none
CREATE OR REPLACE TEMP TABLE history_parts AS
SELECT i.item, i.node, greatest(p.s, i.s) AS s, least(p.e, i.e) AS e, p.w_k
FROM history_items i JOIN screen_prov p ON p.node = i.node AND p.k = i.k AND p.s < i.e AND p.e > i.s;

CREATE OR REPLACE TEMP TABLE history_check AS
SELECT i.item, i.e - i.s AS want, coalesce(c.got, 0) AS got
FROM history_items i LEFT JOIN (SELECT item, sum(e - s) AS got FROM history_parts GROUP BY item) c USING (item)
WHERE coalesce(c.got, 0) <> i.e - i.s;

-- the writers, looked up without a pass over every column of the timeline: the node's own writes by
-- seq (k = seq * 2 * 2^20, as in timeline_view.sql), the transfers that landed in timeline_xfer by
-- (pos, sub) (k = pos * 2^20 + sub, pos odd)
CREATE OR REPLACE TEMP TABLE history_writers AS
WITH keys AS (SELECT DISTINCT node, w_k FROM history_parts WHERE w_k IS NOT NULL)
SELECT e.node, own_key(e.seq) AS k, e.room, false AS ambiguous, e.ts
FROM page_events e
SEMI JOIN (SELECT node, key_seq(w_k) AS seq FROM keys WHERE NOT is_landed(w_k)) USING (node, seq)
WHERE e.op <> 'transfer'
UNION ALL
SELECT x.node, kv_key(x.pos, x.sub) AS k, x.room, x.ambiguous, x.ts
FROM timeline_xfer x
SEMI JOIN (SELECT node, key_pos(w_k) AS pos, key_sub(w_k) AS sub FROM keys WHERE is_landed(w_k))
     USING (node, pos, sub);

CREATE OR REPLACE TABLE history_found AS
SELECT p.item, p.s, p.e, w.room AS w_room, w.k AS w_k, w.ambiguous AS w_amb, w.ts AS w_ts
FROM history_parts p JOIN history_writers w ON w.node = p.node AND w.k = p.w_k;

DROP TABLE history_writers;

CREATE OR REPLACE TABLE history_open AS
SELECT item, s, e FROM history_parts WHERE w_k IS NULL;

-- One round of the last-writer lookup for the open pieces of history items: candidate writes are
-- the node's last `hw` writes before the item (hw = 0: all of them), found through equality on
-- write-index buckets; within each item, the open piece is split at the candidates' ends and each
-- part takes the latest candidate covering it. Parts with no candidate stay open for a wider round.
-- grain: item, part; reads: history_open, history_items, history_writes; params: hw
CREATE OR REPLACE TEMP TABLE cand AS
WITH o AS (  -- one span per item over its open pieces: the join cost follows items, not pieces
    SELECT o.item, o.s, o.e, i.node, i.k AS q_k, i.qidx,
           CASE WHEN getvariable('hw') > 0 THEN greatest(i.qidx - getvariable('hw'), 0) ELSE 0 END AS lo_idx
    FROM (SELECT item, min(s) AS s, max(e) AS e FROM history_open GROUP BY item) o JOIN history_items i USING (item)
), ob AS (  -- the write-index buckets each open piece needs (hw > 0), or one catch-all bucket
    SELECT o.*, unnest(CASE WHEN getvariable('hw') > 0
                            THEN range(o.lo_idx // getvariable('hw'), (o.qidx - 1) // getvariable('hw') + 1)
                            ELSE [0] END) AS bucket
    FROM o WHERE o.qidx > 0
)
SELECT ob.item, greatest(w.start, ob.s) AS cs, least(w."end", ob.e) AS ce, w.k, w.room, w.ambiguous, w.ts
FROM ob JOIN history_writes w
  ON w.node = ob.node
 AND (CASE WHEN getvariable('hw') > 0 THEN w.widx // getvariable('hw') ELSE 0 END) = ob.bucket
WHERE w.widx >= ob.lo_idx AND w.widx < ob.qidx AND w.start < ob.e AND w."end" > ob.s;

CREATE OR REPLACE TEMP TABLE parts AS
WITH b AS (
    SELECT item, b, (row_number() OVER (PARTITION BY item ORDER BY b) - 1)::BIGINT AS idx
    FROM (SELECT item, s AS b FROM history_open UNION SELECT item, e FROM history_open
          UNION SELECT item, cs FROM cand UNION SELECT item, ce FROM cand)
), best AS (
    SELECT item, p, max(k) AS w_k, arg_max(room, k) AS w_room, arg_max(ambiguous, k) AS w_amb, arg_max(ts, k) AS w_ts
    FROM (SELECT c.*, unnest(range(x.idx, y.idx)) AS p
          FROM cand c JOIN b x ON x.item = c.item AND x.b = c.cs JOIN b y ON y.item = c.item AND y.b = c.ce)
    GROUP BY item, p
), open_parts AS (  -- every part of every open piece
    SELECT o.item, b1.idx AS p, b1.b AS s, b2.b AS e
    FROM history_open o
    JOIN b b1 ON b1.item = o.item AND b1.b >= o.s AND b1.b < o.e
    JOIN b b2 ON b2.item = o.item AND b2.idx = b1.idx + 1
)
SELECT op.item, op.s, op.e, best.w_room, best.w_k, best.w_amb, best.w_ts
FROM open_parts op LEFT JOIN best USING (item, p);

INSERT INTO history_found  -- adjacent parts with the same last write merged into one range
SELECT item, min(s), max(e), any_value(w_room), w_k, any_value(w_amb), any_value(w_ts) FROM (
    SELECT *, sum(CASE WHEN s = prev_e THEN 0 ELSE 1 END) OVER (PARTITION BY item, w_k ORDER BY s) AS island
    FROM (SELECT *, lag(e) OVER (PARTITION BY item, w_k ORDER BY s) AS prev_e FROM parts WHERE w_k IS NOT NULL))
GROUP BY item, w_k, island;

CREATE OR REPLACE TABLE history_open AS
SELECT item, min(s) AS s, max(e) AS e FROM (
    SELECT item, s, e, sum(CASE WHEN s = prev_e THEN 0 ELSE 1 END) OVER (PARTITION BY item ORDER BY s) AS island
    FROM (SELECT item, s, e, lag(e) OVER (PARTITION BY item ORDER BY s) AS prev_e FROM parts WHERE w_k IS NULL))
GROUP BY item, island;

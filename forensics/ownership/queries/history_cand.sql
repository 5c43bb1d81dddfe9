-- One round of the last-writer lookup for the open pieces of history items: candidate writes are
-- the node's last `hw` writes before the item (hw = 0: all of them), found through equality on
-- write-index buckets, clipped to the item's open span. forensics.envelope then splits each open
-- piece at the candidates' ends and gives each part the latest candidate covering it; parts with no
-- candidate stay open for a wider round.
-- grain: item, candidate write; reads: history_open, history_items, history_writes; params: hw
CREATE OR REPLACE TEMP TABLE cand AS
WITH o AS (  -- one span per item over its open pieces: the join cost follows items, not pieces
    SELECT o.item, o.s, o.e, i.node, i.k AS q_k, i.qidx,
           CASE WHEN $hw > 0 THEN greatest(i.qidx - $hw, 0) ELSE 0 END AS lo_idx
    FROM (SELECT item, min(s) AS s, max(e) AS e FROM history_open GROUP BY item) o JOIN history_items i USING (item)
), ob AS (  -- the write-index buckets each open piece needs (hw > 0), or one catch-all bucket
    SELECT o.*, unnest(CASE WHEN $hw > 0
                            THEN range(o.lo_idx // $hw, (o.qidx - 1) // $hw + 1)
                            ELSE [0] END) AS bucket
    FROM o WHERE o.qidx > 0
)
SELECT ob.item, greatest(w.start, ob.s) AS cs, least(w."end", ob.e) AS ce, w.k, w.room, w.ambiguous, w.ts
FROM ob JOIN history_writes w
  ON w.node = ob.node
 AND (CASE WHEN $hw > 0 THEN w.widx // $hw ELSE 0 END) = ob.bucket
WHERE w.widx >= ob.lo_idx AND w.widx < ob.qidx AND w.start < ob.e AND w."end" > ob.s;

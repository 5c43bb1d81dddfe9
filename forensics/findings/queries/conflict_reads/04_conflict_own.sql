-- Step 4 of conflict_reads: makes conflict_own.
-- grain: read of the later room's own transfer x conflict, on their overlap; reads: room_state, conflict_keys; params: none
-- scratch: conflict_own
CREATE OR REPLACE TEMP TABLE conflict_own AS  -- reads of the `later` room's own transfer, on the overlap
SELECT s.node, greatest(s.seg_start, c.ov_start) AS seg_start, least(s.seg_end, c.ov_end) AS seg_end, s.k, s.pos,
       s.op, s.room, s.ts, c.earlier_room AS w_room, c.earlier_k AS w_k, key_pos(c.earlier_k) AS w_pos, s.a_k,
       s.room AS a_room, key_pos(s.a_k) AS a_pos,
       CASE WHEN s.op = 'share' THEN 'shared' ELSE 'foreign' END AS cls,
       CASE WHEN s.a_k IS NOT NULL AND c.earlier_k > s.a_k THEN 'foreign_write' ELSE 'stale' END AS kind,
       false AS uncertain, (s.a_k IS NULL OR s.a_k < coalesce(s.f_k, -1)) AS unheld, true AS unsettled, c.reason
FROM room_state s JOIN conflict_keys c ON c.node = s.node AND c.later_k = s.w_k AND c.later_room = s.room
WHERE s.op IN ('read', 'share') AND s.w_k > coalesce(s.a_k, -1) AND coalesce(s.i_k, -1) < s.w_k
  AND s.seg_start < c.ov_end AND s.seg_end > c.ov_start AND (c.read_hi_pos IS NULL OR s.pos < c.read_hi_pos)
  AND c.alloc_hi_pos IS NULL;

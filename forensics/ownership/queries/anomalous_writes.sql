-- Writes by a room into slots it does not hold at that moment (a transfer landing after the receiver
-- freed the slots, or any write outside the writer's allocation), per piece of the writer's range;
-- and every write by a room that was allocated slots another room still held (double allocation),
-- since the other holder may be reading them.
-- grain: node, room, k, seg_start; reads: room_state, alloc_overlaps; params: none
CREATE OR REPLACE TABLE anomalous_writes AS
SELECT s.node, s.room, s.k, s.pos, s.op, s.seg_start, s.seg_end, s.ambiguous, s.ts, s.ts_hi, s.f_k,
       coalesce(s.a_k > coalesce(s.f_k, -1), false) AS held, s.kg
FROM room_state s
WHERE s.op IN ('write', 'xfer')
  AND (NOT coalesce(s.a_k > coalesce(s.f_k, -1), false)
       OR (s.node, s.room) IN (SELECT node, room FROM alloc_overlaps
                               WHERE h_node = node AND h_room <> room AND h_start < x_end AND h_end > x_start
                               UNION SELECT h_node, h_room FROM alloc_overlaps
                               WHERE h_node = node AND h_room <> room AND h_start < x_end AND h_end > x_start));

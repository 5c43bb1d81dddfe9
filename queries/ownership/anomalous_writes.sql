-- Writes by a room into slots it does not hold at that moment (a transfer landing after the receiver
-- freed the slots, or any write outside the writer's allocation), per piece of the writer's range.
-- grain: node, room, k, seg_start; reads: room_state; params: none
CREATE OR REPLACE TABLE anomalous_writes AS
SELECT s.node, s.room, s.k, s.pos, s.op, s.seg_start, s.seg_end, s.ambiguous, s.ts, s.ts_hi, s.f_k, s.kg
FROM room_state s
WHERE s.op IN ('write', 'xfer') AND NOT coalesce(s.a_k > coalesce(s.f_k, -1), false);

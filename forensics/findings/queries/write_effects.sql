-- Every write into slots another room held at that moment, and whether that room was attending them
-- (it had read them since allocating and not freed them): a foreign_write exposure of that room.
-- grain: node, holder, pos, seg_start; reads: room_state, timeline, seq_gaps; params: none
CREATE OR REPLACE TABLE write_effects AS
SELECT s.node, s.seg_start, s.seg_end, s.k, s.pos, s.src_op AS op, s.src_room AS room, s.ts, s.ts_hi, s.ambiguous,
       CASE WHEN s.r_k > coalesce(s.a_k, -1) AND s.a_k > coalesce(s.f_k, -1) THEN s.room END AS attending_room,
       s.r_k, key_pos(s.r_k) AS r_pos, s.r_ts, s.room AS holder,
       s.ambiguous OR EXISTS (
           SELECT 1 FROM seq_gaps g WHERE g.node = s.node AND g.next_pos > coalesce(key_pos(s.r_k), -1) AND g.prev_pos < s.pos
       ) AS uncertain
FROM room_state s WHERE s.op = 'inj';

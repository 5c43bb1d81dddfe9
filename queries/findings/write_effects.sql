-- Every write or landed transfer and whom it hit: the room attending the segment at that moment (read
-- and not freed since) and the room holding it. A write by another room while one attends is a
-- foreign_write exposure; a write into slots the writer does not hold is a hazard.
-- grain: node, seg, pos (writes and transfers); reads: seg_state, segment_bounds, seq_gaps; params: none
CREATE OR REPLACE TABLE write_effects AS
SELECT s.node, s.seg, b.b AS seg_start, n.b AS seg_end, s.pos, s.op, s.room, s.ts, s.ts_hi, s.ambiguous,
       CASE WHEN s.r_pos > coalesce(s.f_pos, -1) THEN s.r_room END AS attending_room,
       s.r_pos, s.r_ts,
       CASE WHEN s.a_pos > coalesce(s.f_pos, -1) THEN s.a_room END AS holder,
       s.ambiguous OR EXISTS (
           SELECT 1 FROM seq_gaps g WHERE g.node = s.node AND g.next_pos > coalesce(s.r_pos, -1) AND g.prev_pos < s.pos
       ) AS uncertain
FROM seg_state s
JOIN segment_bounds b ON b.node = s.node AND b.idx = s.seg
JOIN segment_bounds n ON n.node = s.node AND n.idx = s.seg + 1
WHERE s.op IN ('write', 'xfer');

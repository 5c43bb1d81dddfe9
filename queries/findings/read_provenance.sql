-- What each read found in each segment it attended: own data, shared prefix, another room's data, or
-- nothing ever written. `uncertain` when lost events (a seq gap between the last known write and the
-- read) or a transfer whose landing order the clock bounds cannot settle could change the answer.
-- grain: node, seg, pos (reads and shares); reads: seg_state, segment_bounds, seq_gaps, gap_rooms,
--        transfer_links; params: none
CREATE OR REPLACE TABLE read_provenance AS
SELECT s.node, s.seg, b.b AS seg_start, n.b AS seg_end, s.pos, s.op, s.room, s.ts,
       s.w_room, s.w_pos, s.a_room, s.a_pos,
       CASE WHEN s.w_room IS NULL THEN 'unwritten' WHEN s.w_room = s.room THEN 'own'
            WHEN s.op = 'share' THEN 'shared' ELSE 'foreign' END AS cls,
       CASE WHEN s.a_room = s.room AND s.w_pos > s.a_pos THEN 'foreign_write' ELSE 'stale' END AS kind,
       coalesce(s.w_ambiguous, false)
       OR EXISTS (SELECT 1 FROM gap_rooms gr WHERE gr.room = s.room AND (gr.node <> s.node OR s.op = 'read'
                  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = s.node AND t.room = s.room)))
       OR EXISTS (
           SELECT 1 FROM seq_gaps g WHERE g.node = s.node AND g.next_pos > coalesce(s.w_pos, -1) AND g.prev_pos < s.pos
       ) AS uncertain,
       (s.a_pos IS NULL OR s.a_pos < coalesce(s.f_pos, -1) OR s.a_room <> s.room) AS unheld
FROM seg_state s
JOIN segment_bounds b ON b.node = s.node AND b.idx = s.seg
JOIN segment_bounds n ON n.node = s.node AND n.idx = s.seg + 1
WHERE s.op IN ('read', 'share');

-- Provenance of each certain foreign write into a printed response's pages while it attended them:
-- the writer, how it arrived (transfer from a sender, landing interval on the receiver's clock), the
-- writer's own free of those slots before it (an abort), and the recipient's read.
-- grain: request_id, node, seg, write pos; reads: report_prov, write_effects, timeline, room_requests; params: none
CREATE OR REPLACE TEMP TABLE prov_foreign_rows AS
WITH src AS (  -- the request of each writing room named here (as in prov_stale/)
    SELECT DISTINCT ON (room) room, request_id, account_id, cohort FROM room_requests
    WHERE room IN (SELECT room FROM write_effects) ORDER BY room, request_id)
SELECT p.request_id, we.node, we.seg_start, we.seg_end, we.room AS source_room,
       s.request_id AS source_request_id, s.account_id AS source_account_id, s.cohort AS source_cohort,
       we.op AS write_op, w.sender AS write_sender, w.src AS write_src, we.ts AS write_ts, we.ts_hi AS write_ts_hi,
       we.r_ts AS read_ts, rd.start AS read_start, rd."end" AS read_end,
       f.free_room, f.free_ts
FROM report_prov p
JOIN write_effects we ON we.node = p.node AND we.attending_room = p.room AND we.room <> p.room AND NOT we.uncertain
LEFT JOIN timeline w ON w.node = we.node AND w.k = we.k AND w.room = we.room
LEFT JOIN timeline rd ON rd.node = we.node AND rd.k = we.r_k
LEFT JOIN LATERAL (  -- the writer's own last free of those slots before the write (an abort)
    SELECT any_value(fr.room) AS free_room, max(fr.ts) AS free_ts FROM timeline fr
    WHERE fr.node = we.node AND fr.room = we.room AND fr.op = 'free' AND fr.pos < we.pos
      AND fr.start < we.seg_end AND fr."end" > we.seg_start) f ON true
LEFT JOIN src s ON s.room = we.room;

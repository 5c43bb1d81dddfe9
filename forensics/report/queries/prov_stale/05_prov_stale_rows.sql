-- Step 5 of prov_stale: makes prov_stale_rows.
-- grain: request_id, node, seg (a stale read's row, with its events); reads: room_requests, prov_stale_reads, prov_stale_events; params: none
CREATE OR REPLACE TEMP TABLE prov_stale_rows AS
WITH src AS (  -- the request of each source room named here (rooms map to requests per node: the first)
    SELECT DISTINCT ON (room) room, request_id, account_id, cohort FROM room_requests
    WHERE room IN (SELECT w_room FROM prov_stale_reads) ORDER BY room, request_id)
SELECT rp.request_id, rp.node, rp.seg_start, rp.seg_end, rp.op AS read_op, rp.ts AS read_ts,
       rd.start AS read_start, rd."end" AS read_end, rp.w_room AS source_room,
       s.request_id AS source_request_id, s.account_id AS source_account_id, s.cohort AS source_cohort,
       w.op AS write_op, w.src AS write_src, w.sender AS write_sender, w.ts AS write_ts, w.ts_hi AS write_ts_hi,
       f.free_room, f.free_ts, a.ts AS alloc_ts
FROM prov_stale_reads rp
LEFT JOIN prov_stale_events rd ON rd.node = rp.node AND rd.k = rp.k
LEFT JOIN prov_stale_events w ON w.node = rp.node AND w.k = rp.w_k
LEFT JOIN LATERAL (  -- the writer's own free of those slots after it wrote them
    SELECT any_value(fr.room) AS free_room, min(fr.ts) AS free_ts FROM prov_stale_events fr
    WHERE fr.node = rp.node AND fr.room = rp.w_room AND fr.op = 'free' AND fr.pos > rp.w_pos AND fr.pos < rp.pos
      AND fr.start < rp.seg_end AND fr."end" > rp.seg_start) f ON true
LEFT JOIN prov_stale_events a ON a.node = rp.node AND a.k = rp.a_k
LEFT JOIN src s ON s.room = rp.w_room;

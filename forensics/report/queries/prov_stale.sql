-- Provenance of each certain stale read by a printed response: the read, the last write into the
-- segment (a write on the node or a transfer landing), the last free before the read, and the
-- recipient's alloc. Segments are merged into ranges by the report.
-- grain: request_id, node, seg, read pos; reads: report_prov, read_provenance, page_events, timeline_xfer,
--        room_requests;
-- params: none
CREATE OR REPLACE TEMP TABLE prov_stale_reads AS
SELECT p.request_id, rp.*
FROM report_prov p
JOIN read_provenance rp ON rp.node = p.node AND rp.room = p.room
 AND rp.cls = 'foreign' AND rp.kind = 'stale' AND NOT rp.uncertain AND NOT rp.unsettled;

-- the timeline events those rows name (reads, writes, allocs, the writers' frees). Reading every
-- column of every event costs a full scan (8 s at 100M events), so the node's own events are found
-- on two narrow columns first (seq by key; op and room for the frees), then read whole by seq; the
-- transfers that landed come from timeline_xfer. Keys and positions as in timeline_view.sql: own
-- event k = seq * 2 * 2^20 (pos = 2 * seq); a landed transfer k = pos * 2^20 + sub (pos odd).
CREATE OR REPLACE TEMP TABLE prov_stale_keys AS
SELECT DISTINCT node, k FROM (
    SELECT node, k FROM prov_stale_reads UNION ALL SELECT node, w_k FROM prov_stale_reads
    UNION ALL SELECT node, a_k FROM prov_stale_reads)
WHERE k IS NOT NULL;

CREATE OR REPLACE TEMP TABLE prov_stale_seqs AS
SELECT node, seq FROM page_events
SEMI JOIN (SELECT node, key_seq(k) AS seq FROM prov_stale_keys WHERE NOT is_landed(k)) USING (node, seq)
UNION
SELECT node, seq FROM page_events
SEMI JOIN (SELECT DISTINCT node, w_room AS room FROM prov_stale_reads) USING (node, room)
WHERE op = 'free';

CREATE OR REPLACE TEMP TABLE prov_stale_events AS
SELECT e.node, own_key(e.seq) AS k, e.seq * 2 AS pos, e.op, e.room, e.start, e."end", e.src,
       NULL::VARCHAR AS sender, e.ts, e.ts AS ts_hi
FROM page_events e SEMI JOIN prov_stale_seqs USING (node, seq)
WHERE e.op <> 'transfer'
UNION ALL
SELECT x.node, kv_key(x.pos, x.sub) AS k, x.pos, x.op, x.room, x.start, x."end", x.src, x.sender, x.ts, x.ts_hi
FROM timeline_xfer x
SEMI JOIN (SELECT node, key_pos(k) AS pos, key_sub(k) AS sub FROM prov_stale_keys WHERE is_landed(k))
     USING (node, pos, sub);

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

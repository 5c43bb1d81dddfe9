-- Entry view: the provenance of a response. One row per range of slots, on a node with page events,
-- where the request met something other than its own KV: a read that found another request's KV, a
-- sanctioned shared prefix or nothing ever written, or another request's write (or late transfer)
-- landing in slots it was attending; who wrote it, and whether the evidence settles it. A read fully
-- covered by the request's own writes has no row; responses known from engine logs alone (evidence
-- signature) have none either: see possible_sources.
--   SELECT * FROM response_provenance WHERE request_id = 'req-22f340ee9409' ORDER BY read_at, seg_start;
-- grain: node, room, event, seg_start; reads: read_provenance, write_effects, room_requests; params: none
WITH req AS (
    SELECT room, any_value(request_id ORDER BY request_id) AS request_id,
           any_value(account_id ORDER BY request_id) AS account_id
    FROM internal.room_requests GROUP BY room
), met AS (
    SELECT node, room, ts AS read_at, op, seg_start, seg_end, cls AS kind,
           CASE WHEN cls = 'foreign' THEN kind END AS exposure_kind, w_room AS writer_room, uncertain
    FROM internal.read_provenance
    UNION ALL  -- a write into slots the room was attending: it met that KV at its next step
    SELECT node, attending_room, ts, op, seg_start, seg_end, 'foreign', 'foreign_write', room, uncertain
    FROM internal.write_effects WHERE attending_room IS NOT NULL AND attending_room <> room
)
SELECT rr.request_id, rr.account_id, m.node, m.read_at, m.op, m.seg_start, m.seg_end,
       m.seg_end - m.seg_start AS slots, m.kind, m.exposure_kind, m.writer_room,
       w.request_id AS source_request_id, w.account_id AS source_account_id, m.uncertain, m.room
FROM met m
LEFT JOIN req rr ON rr.room = m.room
LEFT JOIN req w ON w.room = m.writer_room

-- Provenance of each certain stale read by a printed response: the read, the last write into the
-- segment (a write on the node or a transfer landing), the last free before the read, and the
-- recipient's alloc. Segments are merged into ranges by the report.
-- grain: request_id, node, seg, read pos; reads: report_prov, read_provenance, page_events, timeline_xfer,
--        room_requests;
-- params: none
-- scratch: prov_stale_reads
CREATE OR REPLACE TEMP TABLE prov_stale_reads AS
SELECT p.request_id, rp.*
FROM report_prov p
JOIN read_provenance rp ON rp.node = p.node AND rp.room = p.room
 AND rp.cls = 'foreign' AND rp.kind = 'stale' AND NOT rp.uncertain AND NOT rp.unsettled;

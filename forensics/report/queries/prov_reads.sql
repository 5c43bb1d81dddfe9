-- Per printed response: every read event its provenance ranges come from (node, stamp, read range).
-- grain: request_id, node, read_ts, read_start, read_end; reads: prov_merged; params: none
SELECT DISTINCT request_id, node, read_ts, read_start, read_end FROM prov_merged
ORDER BY request_id, node, read_ts, read_start, read_end;

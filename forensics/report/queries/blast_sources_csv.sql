-- blast_sources.csv: every source request whose data was exposed (report_sources, made by
-- blast_sources.sql), by request id.
-- grain: source_request_id; reads: report_sources; params: none
SELECT * FROM report_sources ORDER BY source_request_id, source_room

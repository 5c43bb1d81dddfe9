-- gateway_join.csv: every gateway record without bootstrap_room that no engine request log could be
-- joined to (ingest/queries/gateway_join.sql), with the file (relative to the bundle), the row and why.
-- Such a record stays in the analysis as a request no engine log shows; it is never dropped.
-- grain: file, row; reads: gateway_unjoined, files; params: none
SELECT f.path AS file, u.row, u.request_id, u.reason FROM gateway_unjoined u JOIN files f USING (file_id)
    ORDER BY f.path, u.row

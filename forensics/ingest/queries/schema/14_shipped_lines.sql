-- Step 14 of schema: makes shipped_lines: where each engine line read out of a log shipper's export
-- (forensics.intake.shippers) was in the export, and the shipper's own time and labels for it. The
-- shipper's time is when the pipeline took the line, so it is not before the engine wrote it (it
-- bounds the engine's clock); the labels (pod, container, host) named the node of a file in no
-- engine/<node>/ folder.
-- grain: engine log line (file_id, line) of a shipped file; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS shipped_lines (
    file_id INTEGER, line BIGINT, record BIGINT, format VARCHAR, node VARCHAR, shipped_at TIMESTAMPTZ,
    pod VARCHAR, container VARCHAR, host VARCHAR, namespace VARCHAR, stream VARCHAR);

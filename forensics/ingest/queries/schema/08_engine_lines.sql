-- Step 8 of schema: makes engine_lines.
-- grain: engine log line (file_id, line); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_lines (
    node VARCHAR, file_id INTEGER, line BIGINT, ts TIMESTAMPTZ, ts_resolution_ms INTEGER, rank VARCHAR,
    kind VARCHAR, message VARCHAR);

-- Step 6 of schema: makes engine_lines.
-- grain: engine_lines; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_lines (
    node VARCHAR, file_id INTEGER, line BIGINT, ts TIMESTAMPTZ, ts_resolution_ms INTEGER, rank VARCHAR,
    kind VARCHAR, message VARCHAR);

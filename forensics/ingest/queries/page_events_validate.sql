-- Validate one staged page-event file: every bad row goes to rejected with a reason. The good rows are
-- the others: forensics.ingest.pages copies them from a text file, or reads them in place from a Parquet file.
-- grain: one row per input row of the file (pages_stage); reads: pages_stage; params: file_id
INSERT INTO rejected
SELECT $file_id, row,
    CASE
        WHEN parse_error IS NOT NULL THEN parse_error
        WHEN node IS NULL OR node = '' THEN 'node missing or empty'
        WHEN seq IS NULL THEN 'seq missing or not an integer' || coalesce(': ' || left(seq_raw, 60), '')
        WHEN ts IS NULL THEN 'ts missing or not an RFC 3339 timestamp with zone' || coalesce(': ' || left(ts_raw, 60), '')
        WHEN op IS NULL OR op NOT IN ('alloc', 'free', 'write', 'read', 'share', 'transfer')
            THEN 'unknown op ' || coalesce(left(op, 40), '(missing)') || ' (expected alloc, free, write, read, share, transfer)'
        WHEN room IS NULL THEN 'room missing or not an integer' || coalesce(': ' || left(room_raw, 60), '')
        WHEN start IS NULL OR "end" IS NULL THEN 'start/end missing or not integers'
        WHEN start < 0 THEN 'start is negative'
        WHEN start >= "end" THEN 'empty or inverted slot range [' || start || ', ' || "end" || ')'
        WHEN op = 'transfer' AND (peer IS NULL OR peer = '') THEN 'transfer without peer'
    END AS reason
FROM pages_stage
WHERE reason IS NOT NULL;

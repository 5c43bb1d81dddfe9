-- Validate one staged page-event file: good rows go to page_events, the rest to rejected with a reason.
-- grain: one row per input row of the file (pages_stage)
-- reads: pages_stage; params: file_id
INSERT INTO rejected
SELECT getvariable('file_id'), row,
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

INSERT INTO page_events
SELECT node, seq, ts, op, room, start, "end", nullif(peer, ''), nullif(src, ''), getvariable('file_id'), row
FROM pages_stage
WHERE parse_error IS NULL AND node IS NOT NULL AND node <> '' AND seq IS NOT NULL AND ts IS NOT NULL
  AND op IN ('alloc', 'free', 'write', 'read', 'share', 'transfer') AND room IS NOT NULL
  AND start IS NOT NULL AND "end" IS NOT NULL AND start >= 0 AND start < "end"
  AND NOT (op = 'transfer' AND (peer IS NULL OR peer = ''));

-- Rows of one staged page-event file that page_events_validate.sql might reject: a cheap boolean
-- screen run first on every file (the CASE that names each problem costs about three times as much).
-- A row counts here unless every check is plainly true (a NULL anywhere counts), so 0 means the
-- file has no bad row and the naming pass is skipped; anything else runs it.
-- grain: one row (the count); reads: pages_stage; params: none
SELECT count(*) FROM pages_stage
WHERE NOT coalesce(
    parse_error IS NULL
    AND node IS NOT NULL AND node <> ''
    AND seq IS NOT NULL
    AND ts IS NOT NULL
    AND op IN ('alloc', 'free', 'write', 'read', 'share', 'transfer')
    AND room IS NOT NULL
    AND start IS NOT NULL AND "end" IS NOT NULL
    AND start >= 0
    AND start < "end"
    AND (op <> 'transfer' OR (peer IS NOT NULL AND peer <> '')),
    false)

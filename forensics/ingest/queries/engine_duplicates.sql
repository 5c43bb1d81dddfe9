-- Engine request lines delivered twice (an at-least-once shipper re-sends a batch): a row equal in every
-- field but its line number to an earlier row of the same file is a copy. The first stays; the copies
-- are taken out of engine_requests by forensics.ingest (counted as read and as duplicates, not as
-- loaded: input_duplicates.sql), so that no finding counts or cites a line twice.
-- grain: file_id, line (a copy); reads: engine_requests; params: none
CREATE OR REPLACE TEMP TABLE engine_dups AS
SELECT file_id, line FROM (
    SELECT file_id, line, min(line) OVER (PARTITION BY fields) AS first_line
    FROM (SELECT file_id, line, row(*COLUMNS(* EXCLUDE (line))) AS fields FROM engine_requests)
)
WHERE line > first_line;

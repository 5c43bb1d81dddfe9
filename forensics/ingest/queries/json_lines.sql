-- raw_lines as JSON objects, the view each JSON-lines reader stages from (forensics.ingest.rawtext
-- load_json_lines): `line` is the text where it parses as a JSON object (else NULL), `ok` says which,
-- and `parse_error` says why a line is unusable (a reason marked by chr(31) came from the reader).
-- grain: line of a JSON-lines file; reads: raw_lines; params: none
CREATE OR REPLACE TEMP VIEW json_lines AS
WITH raw AS (
    SELECT row, raw_line, ok, CASE WHEN ok THEN raw_line END AS line FROM (
        SELECT rowid + 1 AS row, line AS raw_line,
               coalesce(CASE WHEN json_valid(line) THEN json_type(line) = 'OBJECT' END, false) AS ok
        FROM raw_lines))
SELECT *,
    CASE WHEN NOT ok THEN CASE WHEN raw_line IS NULL OR trim(raw_line) = '' THEN 'empty line'
         WHEN starts_with(raw_line, chr(31)) THEN substr(raw_line, 2)
         ELSE 'not a JSON object: ' || left(raw_line, 60) END END AS parse_error
FROM raw

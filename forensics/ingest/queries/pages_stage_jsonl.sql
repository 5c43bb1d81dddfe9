-- A JSON-lines page-event file's lines as the page events' fields, each with its raw text where a
-- rejection quotes it: an integer only from a JSON integer, a time only with its zone ($zoned: the
-- pattern of a zoned time's end, forensics.ingest.pages.ZONED). page_events_validate.sql checks them.
-- grain: line of a page-event file; reads: json_lines; params: $zoned
CREATE OR REPLACE TEMP TABLE pages_stage AS
SELECT row, parse_error,
    CASE WHEN ok THEN json_extract_string(line, '$.node') END AS node,
    CASE WHEN ok AND json_type(line, '$.seq') IN ('UBIGINT', 'BIGINT')
         THEN TRY_CAST(json_extract_string(line, '$.seq') AS BIGINT) END AS seq,
    CASE WHEN ok THEN json_extract_string(line, '$.seq') END AS seq_raw,
    CASE WHEN ok AND regexp_matches(json_extract_string(line, '$.ts'), $zoned)
         THEN TRY_CAST(json_extract_string(line, '$.ts') AS TIMESTAMPTZ) END AS ts,
    CASE WHEN ok THEN json_extract_string(line, '$.ts') END AS ts_raw,
    CASE WHEN ok THEN json_extract_string(line, '$.op') END AS op,
    CASE WHEN ok AND json_type(line, '$.room') IN ('UBIGINT', 'BIGINT')
         THEN TRY_CAST(json_extract_string(line, '$.room') AS BIGINT) END AS room,
    CASE WHEN ok THEN json_extract_string(line, '$.room') END AS room_raw,
    CASE WHEN ok AND json_type(line, '$.start') IN ('UBIGINT', 'BIGINT')
         THEN TRY_CAST(json_extract_string(line, '$.start') AS BIGINT) END AS start,
    CASE WHEN ok AND json_type(line, '$.end') IN ('UBIGINT', 'BIGINT')
         THEN TRY_CAST(json_extract_string(line, '$.end') AS BIGINT) END AS "end",
    CASE WHEN ok THEN json_extract_string(line, '$.peer') END AS peer,
    CASE WHEN ok THEN json_extract_string(line, '$.src') END AS src
FROM json_lines

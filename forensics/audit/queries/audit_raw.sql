-- audit_raw0's lines numbered within their file (from 1), each file by its index in $names ($fidx):
-- what the sieve (kept_lines.sql) reads.
-- grain: line of a plain engine file; reads: audit_raw0; params: $names, $fidx
CREATE OR REPLACE TEMP TABLE audit_raw AS
WITH f AS (SELECT unnest($names) AS filename, unnest($fidx) AS fidx),
     s AS (SELECT filename, min(rowid) AS r0 FROM audit_raw0 GROUP BY filename)
SELECT fidx, rowid - r0 + 1 AS line, line AS text FROM audit_raw0 JOIN s USING (filename)
JOIN f USING (filename)

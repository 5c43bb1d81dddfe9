-- Rejected input rows per file and reason (numbers in the reason folded to N), with the first row.
-- grain: path, reason; reads: rejected, files; params: none
SELECT f.path, regexp_replace(r.reason, '[0-9]+', 'N', 'g') AS reason, count(*) AS rows, min(r.row) AS first_row
FROM rejected r JOIN files f USING (file_id) GROUP BY ALL ORDER BY f.path, rows DESC, reason;

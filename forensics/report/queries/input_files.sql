-- The evidence manifest: every input file with its hash and row accounting.
-- grain: file_id; reads: files; params: none
SELECT file_id, source, path, node, sha256, bytes, rows_read, rows_loaded, rows_rejected, error
FROM files ORDER BY path;

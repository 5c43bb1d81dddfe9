-- The exact repeats gateway_dedupe found (gateway_dups), rejected with the record they repeat: its file
-- by the path the reason names ($ids: file ids, $paths: their paths, in the same order) and its row.
-- grain: rejected repeat of a gateway record; reads: gateway_dups; params: $ids, $paths
INSERT INTO rejected
SELECT d.file_id, d.row,
       'duplicate gateway record: request_id ' || d.request_id || ' with every field as at ' || f.path || ' row '
       || d.first_row
FROM gateway_dups d
JOIN (SELECT unnest($ids) AS file_id, unnest($paths) AS path) f ON f.file_id = d.first_file

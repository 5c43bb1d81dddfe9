-- One pass over a staged page-event file ($file_id), per node, into page_file_stats; returns the
-- file's suspect count.
-- grain: file, node; reads: pages_stage, node_config; params: file_id
-- suspect  rows page_events_validate.sql might reject: a cheap boolean screen (the CASE that names
--          each problem costs about three times as much). A row counts unless every check is plainly
--          true (a NULL anywhere counts), so 0 means the file has no bad row and the naming pass is
--          skipped; anything else runs it.
-- beyond   rows whose slots might lie beyond their pool: page_events_beyond_pool.sql, the exact check
--          over the valid rows, runs only when some file counts one.
-- and the figures of telemetry_nodes.sql, which telemetry_nodes_files.sql adds up when every staged
-- row of every page file was kept.
INSERT INTO page_file_stats
WITH pools AS (
    SELECT node, (pool_tokens // page_size + 1) * page_size AS pool_slots
    FROM node_config WHERE pool_tokens IS NOT NULL AND page_size IS NOT NULL
)
SELECT getvariable('file_id'), p.node,
    count(*) FILTER (WHERE NOT coalesce(
        p.parse_error IS NULL
        AND p.node IS NOT NULL AND p.node <> ''
        AND p.seq IS NOT NULL
        AND p.ts IS NOT NULL
        AND p.op IN ('alloc', 'free', 'write', 'read', 'share', 'transfer')
        AND p.room IS NOT NULL
        AND p.start IS NOT NULL AND p."end" IS NOT NULL
        AND p.start >= 0
        AND p.start < p."end"
        AND (p.op <> 'transfer' OR (p.peer IS NOT NULL AND p.peer <> '')),
        false)) AS suspect,
    count(*) FILTER (WHERE p."end" > c.pool_slots) AS beyond,
    min(p.seq), max(p.seq), count(*), min(p.ts), max(p.ts),
    min(p.seq) FILTER (WHERE p.op <> 'transfer'), max(p.seq) FILTER (WHERE p.op <> 'transfer')
FROM pages_stage p
LEFT JOIN pools c ON c.node = CASE WHEN p.op = 'transfer' THEN nullif(p.peer, '') ELSE p.node END
GROUP BY p.node;

SELECT coalesce(sum(suspect), 0) FROM page_file_stats WHERE file_id = getvariable('file_id');

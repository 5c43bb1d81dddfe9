-- Per input file: the lines or records delivered twice (an at-least-once shipper re-sends a batch) and
-- those out of order (a batch delivered late), for evidence_damage. duplicates: engine request lines
-- equal in every field but their line number to an earlier one of the file (engine_duplicates.sql);
-- gateway records and page
-- events rejected as exact repeats (gateway_dedupe.sql, page_events_dedupe.sql). out_of_order: the
-- lines stamped more than a second before a line of the same node earlier in the file (engine logs, by
-- time: the processes of one server share its file, a few ms apart; a shipper's export may hold
-- several nodes), page events whose seq lies below one of the
-- same node earlier in the file (by row), gateway records stamped before one earlier in the file by
-- more than the file's longest request and a second (a gateway stamps a request's start or end and
-- writes its record at the end: in a file written in order no record is earlier by more than that). Files with neither:
-- no row. The engine copies are already out of engine_requests (engine_dups: engine_duplicates.sql).
-- A shipper's export (shipped: their file ids) merges a node's files in the order they were shipped: its
-- lines out of time order are not counted (the analysis reads them in time order either way).
-- grain: file; reads: files, engine_requests, engine_dups, page_events, gateway, rejected; params: shipped
CREATE OR REPLACE TABLE input_duplicates AS
WITH engine AS (
    SELECT file_id, (SELECT count(DISTINCT d.line) FROM engine_dups d WHERE d.file_id = e.file_id) AS duplicates,
           count(*) FILTER (WHERE ts < before - INTERVAL 1 SECOND) AS out_of_order
    FROM (SELECT file_id, ts,
                 CASE WHEN NOT list_contains($shipped::INTEGER[], file_id)
                      THEN max(ts) OVER (PARTITION BY file_id, node ORDER BY line
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) END AS before
          FROM engine_requests) e
    GROUP BY file_id
), pages AS (
    SELECT file_id, count(*) FILTER (WHERE seq < before) AS out_of_order
    FROM (SELECT file_id, seq, max(seq) OVER (PARTITION BY file_id, node ORDER BY row
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
          FROM page_events)
    GROUP BY file_id
), gw AS (  -- a record stamped earlier than one before it by more than the file's longest request
    SELECT file_id, count(*) FILTER (WHERE ts < before - longest) AS out_of_order
    FROM (SELECT file_id, ts,
                 max(ts) OVER (PARTITION BY file_id ORDER BY row ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                     AS before,
                 INTERVAL 1 SECOND + to_microseconds((coalesce(max(duration_ms) OVER (PARTITION BY file_id), 0)
                                                       * 1000)::BIGINT) AS longest
          FROM gateway)
    GROUP BY file_id
), repeats AS (
    SELECT file_id, count(*) AS duplicates FROM rejected
    WHERE reason LIKE 'duplicate gateway record:%' OR reason LIKE 'duplicate event:%'
    GROUP BY file_id
)
SELECT f.path, f.source, f.node,
       coalesce(e.duplicates, 0) + coalesce(r.duplicates, 0) AS duplicates,
       coalesce(e.out_of_order, p.out_of_order, g.out_of_order, 0) AS out_of_order
FROM files f
LEFT JOIN engine e USING (file_id)
LEFT JOIN pages p USING (file_id)
LEFT JOIN gw g USING (file_id)
LEFT JOIN repeats r USING (file_id)
WHERE coalesce(e.duplicates, 0) + coalesce(r.duplicates, 0) > 0
   OR coalesce(e.out_of_order, 0) + coalesce(p.out_of_order, 0) + coalesce(g.out_of_order, 0) > 0
ORDER BY f.path;

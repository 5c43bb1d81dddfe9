-- Evidence damage as ingest found it in each file (input_damage): a file skipped whole (the fields it
-- lacks, by name), a page file cut short or unreadable. A page file names its node only by its path: the
-- node a path segment names is said to have no page telemetry when no other page file gave it events.
-- grain: loss of an input file (input, kind); reads: input_damage, files, node_config, telemetry_nodes;
--        params: none
WITH d AS (
    SELECT f.path, f.source, f.node AS file_node, d.kind, d.detail, d.records_lost, d.lost_basis,
           (SELECT min(c.node) FROM node_config c
            WHERE f.source = 'pages' AND list_contains(string_split_regex(f.path, '[/.=]'), c.node)) AS named
    FROM input_damage d JOIN files f USING (file_id)
    WHERE d.kind <> 'stream_cut'  -- damage_stream_cut.sql estimates what a cut stream lost
)
SELECT path AS input, source, coalesce(file_node, named) AS node, kind,
       detail || CASE
           WHEN source <> 'pages' OR kind = 'skipped_file' AND named IS NULL THEN ''
           WHEN named IS NULL THEN '; which node it held events of is unknown (its path names none)'
           WHEN named IN (SELECT node FROM telemetry_nodes) THEN '; ' || named
                || ' has page events from other files, but not the ones this file held'
           ELSE '; ' || named || ' has no other page events, so it is read as a node without page telemetry: '
                || 'its responses rest on its engine logs alone (the placeholder signature, the allocator model), '
                || 'and none of them is cleared by page events' END AS detail,
       records_lost, lost_basis, NULL::TIMESTAMPTZ AS time_from, NULL::TIMESTAMPTZ AS time_to
FROM d

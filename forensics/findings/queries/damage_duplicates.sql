-- Evidence damage: lines or records an at-least-once shipper delivered twice (kept once), and lines
-- delivered out of order (read in time or seq order), per file (ingest's input_duplicates). Nothing is
-- lost by either (records_lost 0, counted): they are named because a shipper that repeats or reorders
-- may also have dropped, and because the findings must not change with them.
-- grain: file, kind; reads: input_duplicates; params: none
SELECT path AS input, source, node, 'duplicates' AS kind,
       format('{:,} line(s) or record(s) delivered twice: each kept once', duplicates) AS detail,
       0::BIGINT AS records_lost, 'counted' AS lost_basis, NULL::TIMESTAMPTZ AS time_from, NULL::TIMESTAMPTZ AS time_to
FROM input_duplicates WHERE duplicates > 0
UNION ALL
SELECT path, source, node, 'out_of_order',
       format('{:,} line(s) or event(s) out of order in the file: read in time and seq order, not file order',
              out_of_order),
       0::BIGINT, 'counted', NULL::TIMESTAMPTZ, NULL::TIMESTAMPTZ
FROM input_duplicates WHERE out_of_order > 0

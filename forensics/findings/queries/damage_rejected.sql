-- Evidence damage: rows of a file rejected (rejected.csv gives each and why), counted per file with
-- their commonest reasons. A duplicate is not a loss (its first copy is read), and the broken last line
-- of a cut stream is counted with the cut (damage_stream_cut.sql): neither is counted here.
-- grain: input file with rejected rows (input); reads: rejected, files, input_damage; params: none
WITH r AS (
    SELECT r.file_id, split_part(r.reason, ':', 1) AS why, count(*) AS n FROM rejected r
    WHERE NOT starts_with(r.reason, 'duplicate ')
      AND NOT (r.row IS NULL AND r.file_id IN (SELECT file_id FROM input_damage WHERE kind = 'stream_cut'))
    GROUP BY ALL
)
SELECT f.path AS input, f.source, f.node, 'rows_rejected' AS kind,
       format('{:,} rows rejected: ', sum(r.n)::BIGINT)
       || string_agg(format('{} ({:,})', r.why, r.n), '; ' ORDER BY r.n DESC, r.why) AS detail,
       sum(r.n)::BIGINT AS records_lost, 'counted' AS lost_basis, NULL::TIMESTAMPTZ AS time_from,
       NULL::TIMESTAMPTZ AS time_to
FROM r JOIN files f USING (file_id) GROUP BY f.path, f.source, f.node

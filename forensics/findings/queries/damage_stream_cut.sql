-- Evidence damage: compressed streams cut short or broken (input_damage kind stream_cut), with the
-- records they lost estimated. A break with compressed bytes after it: those bytes at the file's own
-- rate of whole lines per compressed byte before the break. A gateway file that ends where it was cut:
-- the records the other gateway files logged after its last record read, in the share of them it
-- logged up to that record, within twice the square root of the estimate (the spread of a count
-- drawn at that share); the lost records lie between that record and the other files' last.
-- Otherwise the loss is unknown (NULL, never 0).
-- grain: cut stream of an input file (input); reads: input_damage, files, gateway; params: none
WITH cut AS (
    SELECT d.*, f.path, f.source, f.node FROM input_damage d JOIN files f USING (file_id) WHERE d.kind = 'stream_cut'
), own AS (
    SELECT c.file_id, count(g.ts) AS n, max(g.ts) AS last_ts
    FROM cut c LEFT JOIN gateway g ON g.file_id = c.file_id WHERE c.source = 'gateway' GROUP BY c.file_id
), share AS (
    SELECT o.file_id, o.n, o.last_ts,
           (SELECT count(*) FROM gateway g WHERE g.file_id NOT IN (SELECT file_id FROM cut) AND g.ts <= o.last_ts) AS before,
           (SELECT count(*) FROM gateway g WHERE g.file_id NOT IN (SELECT file_id FROM cut) AND g.ts > o.last_ts) AS after,
           (SELECT max(ts) FROM gateway g WHERE g.file_id NOT IN (SELECT file_id FROM cut)) AS others_last
    FROM own o
), est AS (
    SELECT c.*, s.n, s.before, s.after, s.last_ts, s.others_last,
           CASE WHEN c.bytes_after > 0 AND c.at_byte > 0 THEN 'bytes'
                WHEN s.n > 0 AND s.before > 0 AND s.after > 0 THEN 'traffic' END AS method
    FROM cut c LEFT JOIN share s USING (file_id)
), lost AS (
    SELECT *, CASE method WHEN 'bytes' THEN round(bytes_after * records_read / at_byte)
                          WHEN 'traffic' THEN round(after * n / before) END::BIGINT AS records
    FROM est
)
SELECT path AS input, source, node, kind,
       detail || CASE method
           WHEN 'bytes' THEN format('; the records lost are estimated from the {:,} compressed bytes after the break, '
                || 'at the rate before it ({:,} whole lines in {:,} compressed bytes)', bytes_after, records_read, at_byte)
           WHEN 'traffic' THEN format('; the records lost are estimated from the traffic, give or take {:,}: after the last '
                || 'record read ({}) the other gateway files logged {:,} records, and this file logged {:,} for '
                || 'their {:,} up to it; it is taken to have kept that share', ceil(2 * sqrt(greatest(records, 1)))::BIGINT,
                strftime(last_ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC'), after, n, before)
           ELSE '; nothing after the cut says how many records it lost' END AS detail,
       records AS records_lost, CASE WHEN records IS NULL THEN 'unknown' ELSE 'estimated' END AS lost_basis,
       CASE WHEN method = 'traffic' THEN last_ts END AS time_from,
       CASE WHEN method = 'traffic' THEN others_last END AS time_to
FROM lost

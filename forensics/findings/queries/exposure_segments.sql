-- Every (recipient, source, kind) with the slot ranges where the recipient attended the source's
-- data, overlapping sightings merged into ranges. certain = at least one sighting in the range that no
-- lost event, unsettled ordering or send that never landed in the files (overwritten_sightings) could
-- undo; all_certain = every
-- sighting in it is.
-- grain: node, recipient_room, source_room, kind, range; reads: read_provenance, write_effects,
--        overwritten_sightings, pull_sightings; params: none
CREATE OR REPLACE TABLE exposure_segments AS
WITH seen AS (
    SELECT node, seg_start, seg_end, room AS recipient_room, w_room AS source_room, kind, ts AS first_ts,
           uncertain OR unsettled AS uncertain
    FROM read_provenance WHERE cls = 'foreign'
    UNION ALL
    SELECT node, seg_start, seg_end, attending_room, room, 'foreign_write', greatest(ts, r_ts), uncertain
    FROM write_effects WHERE attending_room IS NOT NULL AND attending_room <> room
    UNION ALL
    SELECT node, seg_start, seg_end, recipient_room, source_room, kind, first_ts, uncertain FROM pull_sightings
), s AS (
    SELECT x.node, x.seg_start, x.seg_end, x.recipient_room, x.source_room, x.kind, x.first_ts,
           x.uncertain OR o.node IS NOT NULL AS uncertain
    FROM seen x LEFT JOIN overwritten_sightings o USING (node, seg_start, seg_end, recipient_room, source_room, kind)
), islands AS (
    SELECT *, sum(CASE WHEN seg_start <= prev_end THEN 0 ELSE 1 END) OVER (
                  PARTITION BY node, recipient_room, source_room, kind ORDER BY seg_start, seg_end) AS island
    FROM (SELECT *, max(seg_end) OVER (PARTITION BY node, recipient_room, source_room, kind ORDER BY seg_start, seg_end
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end FROM s)
)
SELECT node, island AS seg, min(seg_start) AS seg_start, max(seg_end) AS seg_end, recipient_room, source_room, kind,
       min(first_ts) AS first_ts, bool_or(NOT uncertain) AS certain, bool_and(NOT uncertain) AS all_certain
FROM islands GROUP BY node, recipient_room, source_room, kind, island;

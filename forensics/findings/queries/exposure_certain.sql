-- Per (node, recipient, source, kind) with some uncertain sighting: the distinct slots where the
-- recipient surely attended the source's data (sightings no lost event, unsettled order or unlanded send
-- could undo: overwritten_sightings),
-- the lower bound beside exposures.slots. Pairs whose sightings are all certain are left out: there
-- both counts are the same (exposures.sql), and they are almost every pair.
-- grain: node, recipient_room, source_room, kind; reads: exposure_segments, read_provenance, write_effects,
--        overwritten_sightings; params: none
-- scratch: overwritten_sightings (read by exposure_segments too, which runs before)
CREATE OR REPLACE TEMP TABLE exposure_certain AS
WITH mixed AS (
    SELECT DISTINCT node, recipient_room, source_room, kind FROM exposure_segments WHERE NOT all_certain
), s AS (SELECT * FROM (
    SELECT node, seg_start, seg_end, room AS recipient_room, w_room AS source_room, kind
    FROM read_provenance WHERE cls = 'foreign' AND NOT uncertain AND NOT unsettled
    UNION ALL
    SELECT node, seg_start, seg_end, attending_room, room, 'foreign_write'
    FROM write_effects WHERE attending_room IS NOT NULL AND attending_room <> room AND NOT uncertain
    ) x SEMI JOIN mixed m USING (node, recipient_room, source_room, kind)
    ANTI JOIN overwritten_sightings o USING (node, seg_start, seg_end, recipient_room, source_room, kind)
), islands AS (
    SELECT *, sum(CASE WHEN seg_start <= prev_end THEN 0 ELSE 1 END) OVER (
                  PARTITION BY node, recipient_room, source_room, kind ORDER BY seg_start, seg_end) AS island
    FROM (SELECT *, max(seg_end) OVER (PARTITION BY node, recipient_room, source_room, kind ORDER BY seg_start, seg_end
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end FROM s)
)
SELECT node, recipient_room, source_room, kind, sum(seg_end - seg_start)::BIGINT AS slots
FROM (SELECT node, recipient_room, source_room, kind, min(seg_start) AS seg_start, max(seg_end) AS seg_end
      FROM islands GROUP BY node, recipient_room, source_room, kind, island)
GROUP BY ALL;

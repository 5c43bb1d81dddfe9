-- Sightings of another room's data (read_provenance's foreign reads, write_effects' foreign writes) that
-- a send which never landed in the files (unlanded_sends) may have overwritten before them: its slots
-- overlap, its room is neither side, and its room took those slots on the node no later than the
-- sighting (or no alloc of it is logged). What the reader attended there may be the send's KV instead of
-- the last proven writer's: such a sighting is never certain (exposure_segments, exposure_certain).
-- grain: node, recipient_room, source_room, kind, slot range; reads: read_provenance, write_effects,
--        unlanded_sends; params: none
CREATE OR REPLACE TEMP TABLE overwritten_sightings AS
WITH seen AS (
    SELECT node, seg_start, seg_end, room AS recipient_room, w_room AS source_room, kind, ts
    FROM read_provenance WHERE cls = 'foreign'
    UNION ALL
    SELECT node, seg_start, seg_end, attending_room, room, 'foreign_write', greatest(ts, r_ts)
    FROM write_effects WHERE attending_room IS NOT NULL AND attending_room <> room
)
SELECT DISTINCT x.node, x.seg_start, x.seg_end, x.recipient_room, x.source_room, x.kind
FROM seen x JOIN unlanded_sends u
  ON u.receiver = x.node AND u.start < x.seg_end AND u."end" > x.seg_start
 AND u.room <> x.recipient_room AND u.room <> x.source_room
 AND (u.alloc_ts IS NULL OR u.alloc_ts <= x.ts);

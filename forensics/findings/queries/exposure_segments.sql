-- Every (recipient, source, kind) with the slot ranges where the recipient attended the source's
-- data (a transfer that carried another room's KV, pull_sightings, names that room in those slots, for a
-- later share of them too: vLLM's decode caches what a stale reference brought under the prompt's block
-- hashes, and a prefix hit on them reads it), overlapping
-- sightings merged into ranges. certain = at least one sighting in the range that no
-- lost event, unsettled ordering or send that never landed in the files (overwritten_sightings) could
-- undo; all_certain = every
-- sighting in it is.
-- grain: node, recipient_room, source_room, kind, range; reads: read_provenance, write_effects,
--        overwritten_sightings, pull_sightings; params: none
CREATE OR REPLACE TABLE exposure_segments AS
WITH carried AS (  -- reads and shares whose last writer is a transfer that carried other rooms' KV in some slots
    SELECT r.node, r.room, r.pos, r.seg_start, r.seg_end, r.kind, r.ts, r.uncertain OR r.unsettled AS uncertain,
           p.seg_start AS slot, p.source_room, p.uncertain AS p_uncertain
    FROM read_provenance r
    JOIN pull_sightings p ON p.node = r.node AND p.recipient_room = r.w_room
     AND r.seg_start <= p.seg_start AND p.seg_start < r.seg_end
    WHERE r.cls IN ('foreign', 'shared')
), covered AS (  -- (a share's own rows are not 'foreign': its writer's slots stay a sanctioned share)
    SELECT node, room, pos, seg_start, count(DISTINCT slot) AS slots FROM carried GROUP BY ALL
), seen AS (
    -- the transfer's room is the source only of the slots it did not carry another room's KV into:
    -- none where it carried others' into all, doubted where into some
    SELECT r.node, r.seg_start, r.seg_end, r.room AS recipient_room, r.w_room AS source_room, r.kind,
           r.ts AS first_ts, r.uncertain OR r.unsettled OR c.slots IS NOT NULL AS uncertain
    FROM read_provenance r LEFT JOIN covered c USING (node, room, pos, seg_start)
    WHERE r.cls = 'foreign' AND coalesce(c.slots, 0) < r.seg_end - r.seg_start
    UNION ALL
    SELECT node, slot, slot + 1, room, source_room, kind, ts, uncertain OR p_uncertain
    FROM carried WHERE source_room <> room
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

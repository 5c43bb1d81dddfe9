-- Every (recipient, source, kind) and segment where the recipient attended the source's data.
-- certain = at least one sighting that no lost event or unsettled ordering could undo.
-- grain: node, seg, recipient_room, source_room, kind; reads: read_provenance, write_effects; params: none
CREATE OR REPLACE TABLE exposure_segments AS
SELECT node, seg, any_value(seg_start) AS seg_start, any_value(seg_end) AS seg_end,
       recipient_room, source_room, kind, min(first_ts) AS first_ts, bool_or(NOT uncertain) AS certain
FROM (
    SELECT node, seg, seg_start, seg_end, room AS recipient_room, w_room AS source_room, kind, ts AS first_ts, uncertain
    FROM read_provenance WHERE cls = 'foreign'
    UNION ALL
    SELECT node, seg, seg_start, seg_end, attending_room, room, 'foreign_write', greatest(ts, r_ts), uncertain
    FROM write_effects WHERE attending_room IS NOT NULL AND attending_room <> room
)
GROUP BY node, seg, recipient_room, source_room, kind;

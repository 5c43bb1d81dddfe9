-- Distinct KV slots each recipient attended others' data in, whatever the source: the length of the
-- union of its exposure ranges, each range counting what lies beyond the ends of the ranges sorted
-- before it. forensics.findings.recipient_slots computes the same in numpy (one sort of integer keys
-- instead of a window over every range: 0.5 s against 1.7 s at 100M events) and runs this query only
-- when a slot position or the number of recipients is beyond its packed keys; tests compare the two.
-- grain: node, recipient_room; reads: exposure_segments; params: none
CREATE OR REPLACE TEMP TABLE recipient_slots AS
SELECT node, recipient_room, sum(greatest(0, seg_end - greatest(seg_start, coalesce(prev_end, seg_start))))::BIGINT
       AS slots
FROM (SELECT node, recipient_room, seg_start, seg_end,
             max(seg_end) OVER (PARTITION BY node, recipient_room ORDER BY seg_start, seg_end
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
      FROM exposure_segments)
GROUP BY node, recipient_room;

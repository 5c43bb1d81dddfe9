-- Engine hazards that leaked nothing by themselves: reads of never-written slots, writes into slots the
-- writer does not hold, double allocation, frees of slots not held, reads of unallocated slots.
-- grain: node, room, kind; reads: read_provenance, write_effects, seg_state, segment_bounds; params: none
CREATE OR REPLACE TABLE hazard_segments AS
SELECT node, room, 'uninitialized_read' AS kind, seg_start, seg_end, '' AS note
FROM read_provenance WHERE cls = 'unwritten' AND NOT uncertain
UNION ALL
SELECT node, room, 'read_unallocated', seg_start, seg_end, '' FROM read_provenance WHERE op = 'read' AND unheld
UNION ALL
SELECT node, room, 'write_after_free', seg_start, seg_end,
       CASE WHEN op = 'xfer' THEN 'transfer' ELSE 'write' END || ' while '
       || CASE WHEN holder IS NULL THEN 'nobody held them' ELSE 'room ' || holder || ' held them' END
FROM write_effects WHERE holder IS DISTINCT FROM room
UNION ALL
SELECT s.node, s.room, CASE WHEN s.op = 'alloc' THEN 'double_alloc' ELSE 'free_not_held' END, b.b, n.b,
       CASE WHEN s.a_pos > coalesce(s.f_pos, -1) THEN 'held by room ' || s.a_room ELSE 'held by nobody' END
FROM seg_state s
JOIN segment_bounds b ON b.node = s.node AND b.idx = s.seg
JOIN segment_bounds n ON n.node = s.node AND n.idx = s.seg + 1
WHERE (s.op = 'alloc' AND s.a_pos > coalesce(s.f_pos, -1))
   OR (s.op = 'free' AND NOT (s.a_pos > coalesce(s.f_pos, -1) AND s.a_room = s.room));

CREATE OR REPLACE TABLE hazards AS
WITH d AS (SELECT DISTINCT * FROM hazard_segments),
islands AS (
    SELECT *, sum(CASE WHEN seg_start = prev_end AND note = prev_note THEN 0 ELSE 1 END)
                OVER (PARTITION BY node, room, kind ORDER BY seg_start, note) AS island
    FROM (SELECT *, lag(seg_end) OVER w AS prev_end, lag(note) OVER w AS prev_note
          FROM d WINDOW w AS (PARTITION BY node, room, kind ORDER BY seg_start, note))
), ranges AS (
    SELECT node, room, kind, min(seg_start) AS s, max(seg_end) AS e, sum(seg_end - seg_start) AS n, any_value(note) AS note
    FROM islands GROUP BY node, room, kind, island
)
SELECT node, room, kind, sum(n)::BIGINT AS slots,
       CASE kind WHEN 'uninitialized_read' THEN 'read slots never written: '
                 WHEN 'write_after_free' THEN 'wrote into slots it does not hold: '
                 WHEN 'double_alloc' THEN 'allocated slots already held: '
                 WHEN 'free_not_held' THEN 'freed slots it does not hold: '
                 ELSE 'read slots it does not hold: ' END
       || string_agg('[' || s || ',' || e || ')' || CASE WHEN note <> '' THEN ' (' || note || ')' ELSE '' END, ', ' ORDER BY s)
          FILTER (WHERE true) AS detail
FROM ranges GROUP BY node, room, kind;

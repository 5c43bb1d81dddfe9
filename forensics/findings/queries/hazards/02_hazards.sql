-- Step 2 of hazards: makes hazards.
-- grain: node, room, kind; reads: hazard_segments; params: none
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

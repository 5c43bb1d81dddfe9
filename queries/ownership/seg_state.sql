-- The state of a segment just before each event: last writer (and when), holder, last reader, last free.
-- One sort of seg_events by (node, seg, pos, sub); every column below shares it.
-- grain: node, seg, pos, sub (only reads and writes are kept); reads: seg_events; params: none
CREATE OR REPLACE TABLE seg_state AS
SELECT * FROM (
    SELECT node, seg, pos, sub, op, room, ts, ts_hi, ambiguous,
        last_value(CASE WHEN op IN ('write', 'xfer') THEN room END IGNORE NULLS) OVER w AS w_room,
        last_value(CASE WHEN op IN ('write', 'xfer') THEN pos END IGNORE NULLS) OVER w AS w_pos,
        last_value(CASE WHEN op IN ('write', 'xfer') THEN ambiguous END IGNORE NULLS) OVER w AS w_ambiguous,
        last_value(CASE WHEN op = 'alloc' THEN room END IGNORE NULLS) OVER w AS a_room,
        last_value(CASE WHEN op = 'alloc' THEN pos END IGNORE NULLS) OVER w AS a_pos,
        last_value(CASE WHEN op = 'free' THEN room END IGNORE NULLS) OVER w AS f_room,
        last_value(CASE WHEN op = 'free' THEN pos END IGNORE NULLS) OVER w AS f_pos,
        last_value(CASE WHEN op IN ('read', 'share') THEN room END IGNORE NULLS) OVER w AS r_room,
        last_value(CASE WHEN op IN ('read', 'share') THEN pos END IGNORE NULLS) OVER w AS r_pos,
        last_value(CASE WHEN op IN ('read', 'share') THEN ts END IGNORE NULLS) OVER w AS r_ts
    FROM seg_events
    WINDOW w AS (PARTITION BY node, seg ORDER BY pos, sub ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
) WHERE op IN ('read', 'share', 'write', 'xfer', 'alloc', 'free');

-- Each room's own history on each node, split only at that room's own range boundaries (a handful
-- per room), plus foreign writes injected into the rooms holding the slots they hit (room_injected,
-- empty on the first pass). Just before every event of the room: its last alloc, free, own write,
-- read, and injected foreign write on that piece.
-- With holders_only, only the rooms something was injected into are replayed (the second pass).
-- Reference only: forensics/replay.py computes the same in numpy; tests/test_replay.py compares them.
-- grain: node, room, rseg, k; reads: timeline, room_injected; params: holders_only
CREATE OR REPLACE TABLE room_state_new AS
WITH ev AS (
    SELECT node, room, k, kg, pos, op, start, "end", ambiguous, ts, ts_hi, NULL::BIGINT AS src_room,
           NULL::VARCHAR AS src_op FROM timeline
    WHERE NOT getvariable('holders_only') OR (node, room) IN (SELECT node, holder FROM room_injected)
    UNION ALL
    SELECT node, holder, k, kg, pos, 'inj', start, "end", ambiguous, ts, ts_hi, room, op FROM room_injected
), bounds AS (
    SELECT node, room, b, (row_number() OVER (PARTITION BY node, room ORDER BY b) - 1)::BIGINT AS idx
    FROM (SELECT node, room, start AS b FROM ev UNION SELECT node, room, "end" FROM ev)
), pieces AS (
    SELECT e.*, unnest(range(s.idx, x.idx)) AS rseg
    FROM ev e
    JOIN bounds s ON s.node = e.node AND s.room = e.room AND s.b = e.start
    JOIN bounds x ON x.node = e.node AND x.room = e.room AND x.b = e."end"
)
SELECT p.node, p.room, p.rseg, b.b AS seg_start, n.b AS seg_end, p.k, p.kg, p.pos, p.op, p.ambiguous, p.ts, p.ts_hi, p.src_room, p.src_op,
    last_value(CASE WHEN p.op = 'alloc' THEN p.k END IGNORE NULLS) OVER w AS a_k,
    last_value(CASE WHEN p.op = 'free' THEN p.k END IGNORE NULLS) OVER w AS f_k,
    last_value(CASE WHEN p.op IN ('write', 'xfer') THEN p.k END IGNORE NULLS) OVER w AS w_k,
    last_value(CASE WHEN p.op IN ('write', 'xfer') THEN p.ambiguous END IGNORE NULLS) OVER w AS w_amb,
    last_value(CASE WHEN p.op IN ('read', 'share') THEN p.k END IGNORE NULLS) OVER w AS r_k,
    last_value(CASE WHEN p.op IN ('read', 'share') THEN p.ts END IGNORE NULLS) OVER w AS r_ts,
    last_value(CASE WHEN p.op = 'inj' THEN p.k END IGNORE NULLS) OVER w AS i_k,
    last_value(CASE WHEN p.op = 'inj' THEN p.src_room END IGNORE NULLS) OVER w AS i_room,
    last_value(CASE WHEN p.op = 'inj' THEN p.ambiguous END IGNORE NULLS) OVER w AS i_amb
FROM pieces p
JOIN bounds b ON b.node = p.node AND b.room = p.room AND b.idx = p.rseg
JOIN bounds n ON n.node = p.node AND n.room = p.room AND n.idx = p.rseg + 1
WINDOW w AS (PARTITION BY p.node, p.room, p.rseg ORDER BY p.k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

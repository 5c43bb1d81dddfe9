-- Elementary slot segments per node: every start/end of an event is a boundary, so each event covers
-- whole segments and every segment has one history. Events are mapped to boundary indexes by equality
-- joins and expanded to segments with unnest(range()), never to single slots.
-- grain: node, seg (segment_bounds); node, seg, pos, sub (seg_events); reads: timeline; params: none
CREATE OR REPLACE TABLE segment_bounds AS
SELECT node, b, (row_number() OVER (PARTITION BY node ORDER BY b) - 1)::BIGINT AS idx
FROM (SELECT node, start AS b FROM timeline UNION SELECT node, "end" FROM timeline);

CREATE OR REPLACE TEMP TABLE timeline_idx AS
SELECT t.*, s.idx AS idx_s, e.idx AS idx_e
FROM timeline t
JOIN segment_bounds s ON s.node = t.node AND s.b = t.start
JOIN segment_bounds e ON e.node = t.node AND e.b = t."end";

CREATE OR REPLACE TABLE seg_events AS
SELECT node, unnest(range(idx_s, idx_e)) AS seg, pos, sub, op, room, ts, ts_hi, ambiguous
FROM timeline_idx;

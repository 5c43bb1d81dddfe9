-- Other last writers the evidence allows, for reads of slots an ambiguous landing touched.
-- grain: alternative; reads: ambiguous_landings, prestate_runs (forensics.findings), page_events, node_index;
-- params: none
-- scratch: ambiguous_landings, prestate_candidates, prestate_runs
-- For a read whose writer in the timeline's order is `later_k`, on [ov_start, ov_end), `earlier_k` may
-- be the last write instead (conflict_reads/ adds it as a possible source, the read unsettled):
-- - a write inside the landing's window: the landing may have come after it (later = the write,
--   earlier = the landing);
-- - a read inside the window of the landing's data: the landing may have come after the read, which
--   then found what was there before (later = the landing, earlier = each writer of its slots before
--   it: prestate_runs; reads with pos < read_hi_pos only);
-- - a read of the landing's data by a room that allocated inside the window: the landing may have come
--   after the alloc, a write into its slots (the same writer, kind foreign_write; alloc_hi_pos).
CREATE OR REPLACE TABLE order_alternatives AS
SELECT a.node, greatest(a.start, e.start) AS ov_start, least(a."end", e."end") AS ov_end,
       own_key(e.seq) AS later_k, e.room AS later_room, a.k AS earlier_k, a.room AS earlier_room,
       NULL::BIGINT AS read_hi_pos, NULL::BIGINT AS alloc_hi_pos, NULL::VARCHAR AS alt_kind,
       a.landing || ': it may have landed after the write of room ' || e.room || ' it read' AS reason
FROM (SELECT l.*, x.base + l.seq_lo AS g_lo, x.base + l.seq_hi AS g_hi
      FROM ambiguous_landings l JOIN node_index x USING (node)) a
JOIN (SELECT p.node, p.seq, p.room, p.start, p."end", x.base + p.seq AS g
      FROM page_events p JOIN node_index x USING (node)
      WHERE p.op = 'write' AND p.node IN (SELECT node FROM ambiguous_landings)) e
  ON e.g > a.g_lo AND e.g < a.g_hi
WHERE e.node = a.node AND e.start < a."end" AND e."end" > a.start AND e.room <> a.room
UNION ALL
SELECT a.node, r.s, r.e, a.k, a.room, r.w_k, r.w_room, 2 * a.seq_hi, NULL, NULL,
       a.landing || ': it may have landed after this read, which then found what was there before'
FROM prestate_runs r JOIN ambiguous_landings a USING (item)
WHERE r.w_room <> a.room
UNION ALL
SELECT node, start, "end", k, room, k, room, NULL, 2 * seq_hi, 'foreign_write',
       landing || ': it may have landed after the reader allocated these slots, a write into them'
FROM ambiguous_landings;

-- Candidate last writers of each ambiguous landing's slots just before it (what a read the landing
-- may have followed found there): every earlier write into those slots on the node. Slots in global
-- coordinates (node base + slot) turn the join into two inequalities, which DuckDB runs as one range
-- join instead of pairing every write of the node with every landing.
-- grain: ambiguous landing x earlier overlapping write; reads: ambiguous_landings, timeline, node_index;
-- params: none
CREATE OR REPLACE TEMP TABLE prestate_candidates AS
SELECT a.item, greatest(w.start, a.start) AS cs, least(w."end", a."end") AS ce, w.k, w.room
FROM (SELECT l.*, x.base + l.start AS g_start, x.base + l."end" AS g_end
      FROM ambiguous_landings l JOIN node_index x USING (node)) a
JOIN (SELECT t.node, t.k, t.room, t.start, t."end", x.base + t.start AS g_start, x.base + t."end" AS g_end
      FROM timeline t JOIN node_index x USING (node)
      WHERE t.op IN ('write', 'xfer') AND t.node IN (SELECT node FROM ambiguous_landings)) w
  ON w.g_start < a.g_end AND w.g_end > a.g_start
WHERE w.node = a.node AND w.k < a.k;

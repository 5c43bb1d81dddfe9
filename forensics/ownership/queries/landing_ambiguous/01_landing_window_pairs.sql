-- A landing is `ambiguous` when a receiver event touching the same slots lies strictly inside its
-- window (seq_lo, seq_hi): then the order of the two is unknown. Narrow windows (the usual case: a few
-- events) were checked by forensics.landing.window_hits in one pass over each receiver's events; wide
-- ones (loose clock bounds) take the inequality join here, alone in its own statement so that the
-- planner keeps it. Then the few ambiguous landings are marked.
-- grain: transfer row; reads: transfer_landing, landing_window_hits, page_events, node_index; params: none
CREATE OR REPLACE TEMP TABLE landing_window_pairs AS
SELECT g.sender, g.xseq, g.receiver, g.start, g."end", v.node, v.start AS v_start, v."end" AS v_end
FROM (SELECT fx.sender, fx.xseq, fx.receiver, fx.start, fx."end", nx.base + fx.seq_lo AS sg_lo,
             nx.base + fx.seq_hi AS sg_hi
      FROM transfer_landing fx JOIN node_index nx ON nx.node = fx.receiver WHERE fx.seq_hi - fx.seq_lo > 1024) g
JOIN (SELECT e.node, e.start, e."end", ne.base + e.seq AS sg
      FROM page_events e JOIN node_index ne USING (node) WHERE e.op <> 'transfer') v
  ON v.sg > g.sg_lo AND v.sg < g.sg_hi;

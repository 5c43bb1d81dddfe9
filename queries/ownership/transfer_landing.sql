-- Each transfer placed on its receiver, `ambiguous` when a receiver event touching the same slots lies
-- strictly inside its landing window (seq_lo, seq_hi): then the order of the two is unknown. Narrow
-- windows (the usual case: a few events) were checked by forensics.landing.window_hits in one pass
-- over each receiver's events; wide ones (loose clock bounds) take the inequality join here, alone
-- in its own statement so that the planner keeps it.
-- grain: transfer row; reads: landing_fixed, landing_window_hits, page_events, node_index; params: none
CREATE OR REPLACE TEMP TABLE landing_window_pairs AS
SELECT g.sender, g.xseq, g.receiver, g.start, g."end", v.node, v.start AS v_start, v."end" AS v_end
FROM (SELECT fx.sender, fx.xseq, fx.receiver, fx.start, fx."end", nx.base + fx.seq_lo AS sg_lo,
             nx.base + fx.seq_hi AS sg_hi
      FROM landing_fixed fx JOIN node_index nx ON nx.node = fx.receiver WHERE fx.seq_hi - fx.seq_lo > 1024) g
JOIN (SELECT e.node, e.start, e."end", ne.base + e.seq AS sg
      FROM page_events e JOIN node_index ne USING (node) WHERE e.op <> 'transfer') v
  ON v.sg > g.sg_lo AND v.sg < g.sg_hi;

CREATE OR REPLACE TABLE transfer_landing AS
SELECT f.sender, f.xseq, f.receiver, f.room, f.start, f."end", f.xts, f.ordinary, f.bounded,
       f.seq_lo, f.seq_hi,
       CASE WHEN f.ordinary THEN greatest(coalesce(f.land_lo, f.ats), f.ats) ELSE f.land_lo END AS land_lo,
       CASE WHEN f.ordinary THEN least(coalesce(f.land_hi, f.rts), f.rts) ELSE f.land_hi END AS land_hi,
       (f.sender, f.xseq) IN (SELECT sender, xseq FROM landing_window_pairs
                              WHERE node = receiver AND v_start < "end" AND v_end > start)
       OR (f.sender, f.xseq) IN (SELECT sender, xseq FROM landing_window_hits) AS ambiguous
FROM landing_fixed f;

-- Where each transfer landed on the receiver's own event order. It landed after every receiver event
-- stamped at or before xts + lo and before every event stamped at or after xts + hi (receiver clock);
-- an ordinary transfer also between its room's alloc and read. Between seq_lo and seq_hi the order is
-- unknown: the landing is `ambiguous` when a receiver event touching the same slots lies in there.
-- grain: transfer row; reads: landing_bounds, landing_seqs (forensics.landing), page_events, node_index;
-- params: none
CREATE OR REPLACE TEMP TABLE landing_fixed AS
WITH w AS (SELECT * FROM landing_bounds),
placed AS (
    SELECT w.*, t.first_seq, t.last_seq,
        CASE WHEN w.ordinary THEN greatest(coalesce(lo.seq_max, t.first_seq - 1), w.aseq)
             ELSE coalesce(lo.seq_max, t.first_seq - 1) END AS seq_lo0,
        CASE WHEN w.ordinary THEN least(coalesce(hi.seq_min, t.last_seq + 1), w.rseq)
             ELSE coalesce(hi.seq_min, t.last_seq + 1) END AS seq_hi0
    FROM w JOIN telemetry_nodes t ON t.node = w.receiver
    LEFT JOIN landing_seqs lo USING (sender, xseq) LEFT JOIN landing_seqs hi USING (sender, xseq)),
fixed AS (  -- unbounded clocks or contradictory stamps: only causality (or nothing) is left
    SELECT *,
        CASE WHEN NOT bounded OR seq_lo0 >= seq_hi0 THEN CASE WHEN ordinary THEN aseq ELSE first_seq - 1 END
             ELSE seq_lo0 END AS seq_lo,
        CASE WHEN NOT bounded OR seq_lo0 >= seq_hi0 THEN CASE WHEN ordinary THEN rseq ELSE last_seq + 1 END
             ELSE seq_hi0 END AS seq_hi
    FROM placed)
SELECT * FROM fixed;

-- receiver events strictly inside each landing window (seq_lo, seq_hi). Narrow windows (the usual
-- case: a few events) list their seqs for an equality join; wide ones (loose clock bounds) take the
-- inequality join, alone in its own statement so that the planner keeps it.
CREATE OR REPLACE TEMP TABLE landing_window_pairs AS
SELECT g.sender, g.xseq, g.receiver, g.start, g."end", v.node, v.start AS v_start, v."end" AS v_end
FROM (SELECT sender, xseq, receiver, start, "end", unnest(range(seq_lo + 1, seq_hi)) AS seq
      FROM landing_fixed WHERE seq_hi - seq_lo <= 1024) g
JOIN page_events v ON v.node = g.receiver AND v.seq = g.seq
WHERE v.op <> 'transfer';

INSERT INTO landing_window_pairs
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
                              WHERE node = receiver AND v_start < "end" AND v_end > start) AS ambiguous
FROM landing_fixed f;

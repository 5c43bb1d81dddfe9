-- Each anomalous write, clipped to every holding it hit (another room holding those slots then):
-- injected into that room's own history, so its reads and attention see it. The range join runs
-- first (materialized) so the planner keeps its inequality join.
-- grain: node, holder, k, start; reads: anomalous_writes, holdings; params: none
CREATE OR REPLACE TEMP TABLE inj_pairs AS
SELECT w.node, h.node AS h_node, h.room AS holder, w.room, w.k, w.kg, w.pos, w.seg_start, w.seg_end,
       h.seg_start AS h_start, h.seg_end AS h_end, w.ambiguous, w.ts, w.ts_hi, w.op
FROM anomalous_writes w JOIN holdings h ON h.kg_a < w.kg AND h.kg_f > w.kg;

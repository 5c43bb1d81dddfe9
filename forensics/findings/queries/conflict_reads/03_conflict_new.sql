-- Step 3 of conflict_reads: makes conflict_new.
-- grain: piece of a provenance row a conflict cuts, in each order of the two writes; reads: conflict_prov, read_provenance; params: none
-- scratch: conflict_new
CREATE OR REPLACE TEMP TABLE conflict_new AS
WITH cuts AS (
    SELECT prov_row, cs AS c FROM conflict_prov UNION SELECT prov_row, ce FROM conflict_prov
    UNION SELECT rowid, seg_start FROM read_provenance WHERE rowid IN (SELECT prov_row FROM conflict_prov)
    UNION SELECT rowid, seg_end FROM read_provenance WHERE rowid IN (SELECT prov_row FROM conflict_prov)
), pieces AS (
    SELECT prov_row, c AS ps, lead(c) OVER (PARTITION BY prov_row ORDER BY c) AS pe FROM cuts
)
SELECT r.* REPLACE (p.ps AS seg_start, p.pe AS seg_end,
                    EXISTS (SELECT 1 FROM conflict_prov h WHERE h.prov_row = p.prov_row
                            AND h.cs <= p.ps AND h.ce >= p.pe) AS unsettled)
FROM pieces p JOIN read_provenance r ON r.rowid = p.prov_row
WHERE p.pe IS NOT NULL
UNION ALL  -- the other order: `earlier` is the last write of the overlap
SELECT r.* REPLACE (h.cs AS seg_start, h.ce AS seg_end, h.earlier_room AS w_room, h.earlier_k AS w_k,
                    key_pos(h.earlier_k) AS w_pos,
                    CASE WHEN r.op = 'share' THEN 'shared' ELSE 'foreign' END AS cls,
                    coalesce(h.alt_kind, CASE WHEN r.a_k IS NOT NULL AND h.earlier_k > r.a_k THEN 'foreign_write'
                                              ELSE 'stale' END) AS kind,
                    true AS unsettled)
FROM conflict_prov h JOIN read_provenance r ON r.rowid = h.prov_row
WHERE h.earlier_room <> r.room;

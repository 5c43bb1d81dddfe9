-- Step 2 of conflict_reads: makes conflict_prov.
-- grain: provenance row x conflict whose later write it found, on their overlap; reads: read_provenance, conflict_keys; params: none
-- scratch: conflict_prov
CREATE OR REPLACE TEMP TABLE conflict_prov AS  -- provenance rows that found `later`, on the overlap
SELECT r.rowid AS prov_row, greatest(r.seg_start, c.ov_start) AS cs, least(r.seg_end, c.ov_end) AS ce,
       c.earlier_k, c.earlier_room, c.alt_kind, c.reason
FROM read_provenance r JOIN conflict_keys c ON c.node = r.node AND c.later_k = r.w_k
WHERE r.seg_start < c.ov_end AND r.seg_end > c.ov_start AND (c.read_hi_pos IS NULL OR r.pos < c.read_hi_pos)
  AND (c.alloc_hi_pos IS NULL OR r.a_k > c.later_k AND key_pos(r.a_k) < c.alloc_hi_pos);

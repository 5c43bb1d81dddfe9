-- Reads whose last writer the clock bounds cannot settle, made unsettled with every possible writer.
-- grain: read_provenance row piece (updates read_provenance), node+room+reason (conflict_rooms);
-- reads: transfer_conflicts, order_alternatives, transfer_landing, timeline_xfer, room_state, read_provenance;
-- params: none
-- The cases: slots two transfers filled in an order nothing proves (transfer_conflicts, from
-- forensics.conflicts), and the other last writers an ambiguous landing makes possible
-- (order_alternatives). The timeline puts one writer last (`later`); the evidence also fits an order
-- where another (`earlier`) is the last write. So, on the overlap:
-- - a provenance row whose writer is `later` becomes `unsettled` (split at the overlap's ends: the rest
--   of the row keeps its certain writer), and `earlier` is added as a possible writer, unsettled too;
-- - a read of the `later` room's own transfer (no provenance row: its own data, in the timeline's
--   order) gets `earlier` as a possible, unsettled writer.
-- (`uncertain` keeps its own meaning: lost events or a landing the receiver's events cannot order.)
-- conflict_rooms names every reader so touched with the reason (room_flags adds it).
CREATE OR REPLACE TEMP TABLE conflict_keys AS
WITH x AS (
    SELECT t.node, t.sender, t.xseq, kv_key(t.pos, t.sub) AS k, t.room FROM timeline_xfer t
    SEMI JOIN (SELECT receiver, a_sender AS sender, a_xseq AS xseq FROM transfer_conflicts
               UNION SELECT receiver, b_sender, b_xseq FROM transfer_conflicts) c
      ON c.receiver = t.node AND c.sender = t.sender AND c.xseq = t.xseq
), pairs AS (
    SELECT c.receiver AS node, c.ov_start, c.ov_end, xa.k AS a_k, xa.room AS a_room, xb.k AS b_k, xb.room AS b_room,
           'transfers from ' || c.a_sender || ' (room ' || c.a_room || ') and ' || c.b_sender || ' (room ' || c.b_room
           || ') into slots [' || c.ov_start || ',' || c.ov_end || ') landed in an order the clock bounds cannot settle '
           || '(landing windows ' || coalesce(strftime(la.land_lo AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || '-'
           || coalesce(strftime(la.land_hi AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || ' and '
           || coalesce(strftime(lb.land_lo AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || '-'
           || coalesce(strftime(lb.land_hi AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || ' UTC on ' || c.receiver
           || '''s clock, after its events ' || la.seq_lo || ' and ' || lb.seq_lo || ', before ' || la.seq_hi
           || ' and ' || lb.seq_hi || '): either may be the last write it read' AS reason
    FROM transfer_conflicts c
    JOIN x xa ON xa.node = c.receiver AND xa.sender = c.a_sender AND xa.xseq = c.a_xseq
    JOIN x xb ON xb.node = c.receiver AND xb.sender = c.b_sender AND xb.xseq = c.b_xseq
    JOIN transfer_landing la ON la.sender = c.a_sender AND la.xseq = c.a_xseq
    JOIN transfer_landing lb ON lb.sender = c.b_sender AND lb.xseq = c.b_xseq
)
SELECT node, ov_start, ov_end,  -- later: the one the timeline puts last
       CASE WHEN a_k > b_k THEN a_k ELSE b_k END AS later_k, CASE WHEN a_k > b_k THEN a_room ELSE b_room END AS later_room,
       CASE WHEN a_k > b_k THEN b_k ELSE a_k END AS earlier_k, CASE WHEN a_k > b_k THEN b_room ELSE a_room END AS earlier_room,
       NULL::BIGINT AS read_hi_pos, NULL::BIGINT AS alloc_hi_pos, NULL::VARCHAR AS alt_kind, reason
FROM pairs
UNION ALL
SELECT node, ov_start, ov_end, later_k, later_room, earlier_k, earlier_room, read_hi_pos, alloc_hi_pos, alt_kind, reason
FROM order_alternatives;

CREATE OR REPLACE TEMP TABLE conflict_prov AS  -- provenance rows that found `later`, on the overlap
SELECT r.rowid AS prov_row, greatest(r.seg_start, c.ov_start) AS cs, least(r.seg_end, c.ov_end) AS ce,
       c.earlier_k, c.earlier_room, c.alt_kind, c.reason
FROM read_provenance r JOIN conflict_keys c ON c.node = r.node AND c.later_k = r.w_k
WHERE r.seg_start < c.ov_end AND r.seg_end > c.ov_start AND (c.read_hi_pos IS NULL OR r.pos < c.read_hi_pos)
  AND (c.alloc_hi_pos IS NULL OR r.a_k > c.later_k AND key_pos(r.a_k) < c.alloc_hi_pos);

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

CREATE OR REPLACE TEMP TABLE conflict_own AS  -- reads of the `later` room's own transfer, on the overlap
SELECT s.node, greatest(s.seg_start, c.ov_start) AS seg_start, least(s.seg_end, c.ov_end) AS seg_end, s.k, s.pos,
       s.op, s.room, s.ts, c.earlier_room AS w_room, c.earlier_k AS w_k, key_pos(c.earlier_k) AS w_pos, s.a_k,
       s.room AS a_room, key_pos(s.a_k) AS a_pos,
       CASE WHEN s.op = 'share' THEN 'shared' ELSE 'foreign' END AS cls,
       CASE WHEN s.a_k IS NOT NULL AND c.earlier_k > s.a_k THEN 'foreign_write' ELSE 'stale' END AS kind,
       false AS uncertain, (s.a_k IS NULL OR s.a_k < coalesce(s.f_k, -1)) AS unheld, true AS unsettled, c.reason
FROM room_state s JOIN conflict_keys c ON c.node = s.node AND c.later_k = s.w_k AND c.later_room = s.room
WHERE s.op IN ('read', 'share') AND s.w_k > coalesce(s.a_k, -1) AND coalesce(s.i_k, -1) < s.w_k
  AND s.seg_start < c.ov_end AND s.seg_end > c.ov_start AND (c.read_hi_pos IS NULL OR s.pos < c.read_hi_pos)
  AND c.alloc_hi_pos IS NULL;

CREATE OR REPLACE TABLE conflict_rooms AS
SELECT DISTINCT node, room, reason FROM (
    SELECT r.node, r.room, h.reason FROM conflict_prov h JOIN read_provenance r ON r.rowid = h.prov_row
    UNION ALL
    SELECT node, room, reason FROM conflict_own
);

DELETE FROM read_provenance WHERE rowid IN (SELECT prov_row FROM conflict_prov);

INSERT INTO read_provenance SELECT * FROM conflict_new;

INSERT INTO read_provenance SELECT * EXCLUDE (reason) FROM conflict_own WHERE w_room <> room;

DROP TABLE conflict_new;
DROP TABLE conflict_prov;
DROP TABLE conflict_own;
DROP TABLE conflict_keys;

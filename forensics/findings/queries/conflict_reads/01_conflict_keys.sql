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
-- scratch: conflict_keys
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

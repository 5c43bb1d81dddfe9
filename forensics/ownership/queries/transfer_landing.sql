-- Where each transfer landed on the receiver's own event order.
-- grain: transfer row; reads: landing_bounds, landing_seqs (forensics.landing), telemetry_nodes; params: none
-- It landed after every receiver event stamped at or before xts + lo and before every event stamped at
-- or after xts + hi (receiver clock); an ordinary transfer also between its room's alloc and read.
-- Between seq_lo and seq_hi the order is unknown: the landing is `ambiguous` when a receiver event
-- touching the same slots lies in there (set by landing_ambiguous.sql; false here). `conflict`: another
-- transfer into overlapping slots may have landed before or after it (set by forensics.conflicts).
-- scratch: landing_seqs (made by forensics.ownership.steps.landing for this step)
CREATE OR REPLACE TABLE transfer_landing AS
WITH w AS (SELECT * FROM landing_bounds),
placed AS (
    SELECT w.*, t.first_seq, t.last_seq,
        CASE WHEN w.ordinary THEN greatest(coalesce(s.seq_max, t.first_seq - 1), w.aseq)
             ELSE coalesce(s.seq_max, t.first_seq - 1) END AS seq_lo0,
        CASE WHEN w.ordinary THEN least(coalesce(s.seq_min, t.last_seq + 1), w.rseq)
             ELSE coalesce(s.seq_min, t.last_seq + 1) END AS seq_hi0
    FROM w JOIN telemetry_nodes t ON t.node = w.receiver
    LEFT JOIN landing_seqs s USING (link)),
fixed AS (  -- unbounded clocks or contradictory stamps: only causality (or nothing) is left
    SELECT *,
        CASE WHEN NOT bounded OR seq_lo0 >= seq_hi0 THEN CASE WHEN ordinary THEN aseq ELSE first_seq - 1 END
             ELSE seq_lo0 END AS seq_lo,
        CASE WHEN NOT bounded OR seq_lo0 >= seq_hi0 THEN CASE WHEN ordinary THEN rseq ELSE last_seq + 1 END
             ELSE seq_hi0 END AS seq_hi
    FROM placed)
SELECT f.sender, f.xseq, f.receiver, f.room, f.start, f."end", f.xts, f.ordinary, f.bounded,
       f.seq_lo, f.seq_hi,
       CASE WHEN f.ordinary THEN greatest(coalesce(f.land_lo, f.ats), f.ats) ELSE f.land_lo END AS land_lo,
       CASE WHEN f.ordinary THEN least(coalesce(f.land_hi, f.rts), f.rts) ELSE f.land_hi END AS land_hi,
       false AS ambiguous, false AS conflict
FROM fixed f;

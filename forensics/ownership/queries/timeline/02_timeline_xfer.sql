-- Step 2 of timeline: makes timeline_xfer.
-- grain: node, pos, sub (a transfer landed in the node); reads: transfer_landing, timeline_xfer_sub; params: none
CREATE OR REPLACE VIEW timeline_xfer AS
SELECT t.receiver AS node, landed_pos(t.seq_lo) AS pos, coalesce(r.sub, 1)::BIGINT AS sub, 'xfer' AS op, t.room, t.start,
       t."end", t.land_lo AS ts, t.land_hi AS ts_hi, 'transfer' AS src, t.sender, t.xseq, t.ambiguous
FROM transfer_landing t LEFT JOIN timeline_xfer_sub r USING (sender, xseq);

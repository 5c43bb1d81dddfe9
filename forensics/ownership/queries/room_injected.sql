-- Each anomalous write clipped to every holding it hit (another room holding those slots then; the
-- pairs from forensics.ownership.steps.overlaps): injected into that room's own history, so its reads
-- and attention see it.
-- grain: node, holder, k, start (an anomalous write clipped to a holding it hit); reads: inj_pairs; params: none
CREATE OR REPLACE TABLE room_injected AS
SELECT node, holder, room, k, kg, pos, greatest(seg_start, h_start) AS start, least(seg_end, h_end) AS "end",
       ambiguous, ts, ts_hi, op
FROM inj_pairs WHERE h_node = node AND holder <> room AND h_start < seg_end AND h_end > seg_start;

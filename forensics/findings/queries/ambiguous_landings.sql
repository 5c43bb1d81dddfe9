-- Transfers whose landing a receiver event touching the same slots may precede or follow (`ambiguous`,
-- landing_ambiguous.sql), with their place in the receiver's timeline: the order the timeline picks
-- (the landing first, at seq_lo) is one of the orders the evidence allows; order_alternatives names
-- what the others would change. Numbered (item) for the last-writer search of their slots.
-- grain: ambiguous transfer; reads: timeline_xfer, transfer_landing; params: none
CREATE OR REPLACE TEMP TABLE ambiguous_landings AS
SELECT row_number() OVER (ORDER BY t.node, t.pos, t.sub) - 1 AS item, t.node, t.sender, t.xseq, t.room, t.start,
       t."end", kv_key(t.pos, t.sub) AS k, t.pos, l.seq_lo, l.seq_hi,
       'a transfer from ' || t.sender || ' (room ' || t.room || ') into slots [' || t.start || ',' || t."end"
       || ') landed at a moment the clock bounds cannot order against events on them (landing window '
       || coalesce(strftime(l.land_lo AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || '-'
       || coalesce(strftime(l.land_hi AT TIME ZONE 'UTC', '%H:%M:%S.%f'), '?') || ' UTC on ' || t.node
       || '''s clock, between its events ' || l.seq_lo || ' and ' || l.seq_hi || ')' AS landing
FROM timeline_xfer t JOIN transfer_landing l ON l.sender = t.sender AND l.xseq = t.xseq
WHERE t.ambiguous;

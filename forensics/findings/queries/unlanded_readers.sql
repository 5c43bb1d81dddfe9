-- Each read of slots a send that never landed in the files (unlanded_sends) may have reached: a read or
-- share by another room of those slots after the send's room took them on the receiver. A read is out of
-- its reach when the sender concluded the room before it, proven on the receiver's clock (bound_ts), and
-- what the read found there was the reader's own KV written after that: the reader took every such slot
-- no earlier than bound_ts and no slot of it in the send's range shows another writer, a share or nothing
-- (read_provenance: its own writes, made after its alloc, overwrote whatever the send left). A reader
-- that took a slot before bound_ts, or whose pair's clock bounds cannot order it, stays within reach.
-- Read by room_flags (those readers are indeterminate) and possible_extra (the send's room is a
-- possible source of theirs).
-- grain: node, reading room, sender, send room, slot range; reads: unlanded_sends, page_events,
--        read_provenance; params: none
CREATE OR REPLACE TEMP TABLE unlanded_readers AS
SELECT DISTINCT p.node, p.room, s.sender, s.room AS send_room, s.start, s."end", s.failed
FROM unlanded_sends s
JOIN page_events p
  ON p.node = s.receiver AND p.op IN ('read', 'share') AND p.room <> s.room
 AND p.start < s."end" AND p."end" > s.start AND p.seq > coalesce(s.alloc_seq, -1)
WHERE NOT (
    s.bound_ts IS NOT NULL AND p.op = 'read'
    AND EXISTS (SELECT 1 FROM page_events a WHERE a.node = p.node AND a.room = p.room AND a.op = 'alloc'
                AND a.seq < p.seq AND a.start < least(p."end", s."end") AND a."end" > greatest(p.start, s.start))
    AND NOT EXISTS (SELECT 1 FROM page_events a WHERE a.node = p.node AND a.room = p.room AND a.op = 'alloc'
                    AND a.seq < p.seq AND a.start < least(p."end", s."end") AND a."end" > greatest(p.start, s.start)
                    AND a.ts < s.bound_ts)
    AND NOT EXISTS (SELECT 1 FROM read_provenance r WHERE r.node = p.node AND r.room = p.room AND r.cls <> 'own'
                    AND r.seg_start < least(p."end", s."end") AND r.seg_end > greatest(p.start, s.start))
);

-- Transfers sent (a transfer row with src sent, logged when the chunk went to the transfer engine) whose
-- room has no landed transfer row from that sender to that receiver: the room ended Failed (src failed:
-- decode's abort arrived mid-send, and the chunk's RDMA writes may still land) or never concluded in the
-- files. Such a send may have written its slots on the receiver at any moment after its room took them
-- there (alloc_seq, alloc_ts: the room's first alloc of those slots; empty when none is logged, and then
-- at any moment at all) and before the sender concluded the room (concluded_ts: its first row with src
-- concluded for that receiver after the room's sends, on the sender's clock; empty when none is logged,
-- and then at any moment after). bound_ts is that end on the receiver's clock, proven: concluded_ts plus
-- the pair's upper clock-offset bound (clock_bounds), empty when the pair's bounds do not order it.
-- Read by unlanded_readers (the later readers the send may have reached), exposure_segments (a sighting
-- of those slots after the room took them is not certain: the send may have overwritten what the last
-- proven writer left) and possible_extra (the send's room is a possible source of those readers).
-- grain: receiver, room, sender, slot range; reads: page_events, clock_bounds; params: none
CREATE OR REPLACE TABLE unlanded_sends AS
WITH s AS (
    SELECT node AS sender, peer AS receiver, room, start, "end", bool_or(src = 'failed') AS failed,
           max(seq) FILTER (WHERE src = 'sent') AS sent_seq
    FROM page_events WHERE op = 'transfer' AND src IN ('sent', 'failed')
    GROUP BY node, peer, room, start, "end"
), c AS (
    SELECT s.sender, s.receiver, s.room, s.start, s."end", min(e.ts) AS concluded_ts
    FROM s JOIN page_events e
      ON e.node = s.sender AND e.peer = s.receiver AND e.room = s.room AND e.op = 'transfer'
     AND e.src = 'concluded' AND e.seq > coalesce(s.sent_seq, -1)
    GROUP BY ALL
), a AS (
    SELECT s.sender, s.receiver, s.room, s.start, s."end", min(a.seq) AS alloc_seq, min(a.ts) AS alloc_ts
    FROM s JOIN page_events a ON a.node = s.receiver AND a.room = s.room AND a.op = 'alloc'
     AND a.start < s."end" AND a."end" > s.start
    GROUP BY ALL
)
SELECT s.sender, s.receiver, s.room, s.start, s."end", s.failed, a.alloc_seq, a.alloc_ts, c.concluded_ts,
       CASE WHEN b.consistent THEN c.concluded_ts + to_microseconds(b.hi_us) END AS bound_ts
FROM s
LEFT JOIN a USING (sender, receiver, room, start, "end")
LEFT JOIN c USING (sender, receiver, room, start, "end")
LEFT JOIN clock_bounds b USING (sender, receiver)
WHERE NOT EXISTS (SELECT 1 FROM page_events l WHERE l.op = 'transfer'
                  AND coalesce(l.src, '') NOT IN ('sent', 'failed', 'concluded')
                  AND l.node = s.sender AND l.peer = s.receiver AND l.room = s.room);

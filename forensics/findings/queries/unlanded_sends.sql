-- Transfers sent (a transfer row with src sent, logged when the chunk went to the transfer engine) whose
-- room has no landed transfer row from that sender to that receiver: the room ended Failed (src failed:
-- decode's abort arrived mid-send, and the chunk's RDMA writes may still land) or never concluded in the
-- files. Such a send may have written its slots on the receiver at any moment after its room took them
-- there (alloc_seq, alloc_ts: the room's first alloc of those slots; empty when none is logged, and then
-- at any moment at all): no landing time bounds it. Read by room_flags (the later readers are
-- indeterminate), exposure_segments (a sighting of those slots after the room took them is not certain:
-- the send may have overwritten what the last proven writer left) and possible_extra (the send's room
-- is a possible source of those readers).
-- grain: receiver, room, sender, slot range; reads: page_events; params: none
CREATE OR REPLACE TABLE unlanded_sends AS
WITH s AS (
    SELECT node AS sender, peer AS receiver, room, start, "end", bool_or(src = 'failed') AS failed
    FROM page_events WHERE op = 'transfer' AND src IN ('sent', 'failed')
    GROUP BY node, peer, room, start, "end"
)
SELECT s.*, min(a.seq) AS alloc_seq, min(a.ts) AS alloc_ts
FROM s
LEFT JOIN page_events a ON a.node = s.receiver AND a.room = s.room AND a.op = 'alloc'
     AND a.start < s."end" AND a."end" > s.start
WHERE NOT EXISTS (SELECT 1 FROM page_events l WHERE l.op = 'transfer' AND coalesce(l.src, '') NOT IN ('sent', 'failed')
                  AND l.node = s.sender AND l.peer = s.receiver AND l.room = s.room)
GROUP BY ALL;

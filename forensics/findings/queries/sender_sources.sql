-- Per affected response (indeterminate, or confirmed: the stale slots it read may hold another room's
-- unlogged transfer rather than the proven writer's KV) on a receiver whose senders lost page events or
-- kept none, every room whose transfer nobody logged may hold what it read (forensics.findings.sender_sources): a room whose transfer
-- may be invisible (none of it logged on the receiver, or one from a sender that lost events) and that
-- held some slot of the read there from before the read until after the slot's last proven write (its
-- free; without end when it never read there: an aborted room's transfer may land after its free). A
-- superset: a transfer lands only in its room's slots on the receiver, after their alloc and, for a room
-- that read there, before that read; a room is left out only where that rules out its landing between
-- the last write the evidence proves and the read.
-- grain: node, recipient room, source room; reads: sender_hits; params: none
CREATE OR REPLACE TABLE sender_sources AS
SELECT DISTINCT node, recipient_room, source_room FROM sender_hits
WHERE source_room IS DISTINCT FROM recipient_room
ORDER BY ALL;

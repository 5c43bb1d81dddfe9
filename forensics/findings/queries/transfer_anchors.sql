-- The slots of decode node $node that each transfer into it wrote, as the sending prefill logged them
-- (the receiver cannot see one-sided writes): they fix where each request's KV is in the allocator model.
-- Landed transfers only: a row with src sent or failed is a send whose landing nothing proves (room_flags).
-- grain: transfer event into $node; reads: page_events; params: $node
SELECT room, start, "end" FROM page_events WHERE op = 'transfer' AND peer = $node AND coalesce(src, '') NOT IN ('sent', 'failed', 'concluded') ORDER BY room, start, "end"

-- The allocations and frees an instrumented decode node logged, in seq order: what the allocator
-- model's policy is learned from (forensics.findings.likelihood groups them into one batch per run of
-- consecutive events of one op and room: a request's allocation is logged as one event per run of pages).
-- grain: alloc or free event of node $node; reads: page_events; params: $node
SELECT CASE op WHEN 'alloc' THEN 0 ELSE 1 END AS op, room, start, "end"
FROM page_events WHERE node = $node AND op IN ('alloc', 'free') ORDER BY seq

-- Every landed transfer into a node with page telemetry (not a send whose landing nothing proves): what
-- forensics.ownership.steps.transfers links to each room's alloc and read on the receiver.
-- grain: transfer into a node with telemetry; reads: page_events, telemetry_nodes; params: none
SELECT node AS sender, peer AS receiver, seq AS xseq, ts AS xts, room, start, "end"
FROM page_events WHERE op = 'transfer' AND peer IN (SELECT node FROM telemetry_nodes)
  AND coalesce(src, '') NOT IN ('sent', 'failed', 'concluded')

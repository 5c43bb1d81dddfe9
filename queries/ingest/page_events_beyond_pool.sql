-- Valid page events whose slots lie beyond the pool of the node they are in (the receiver's, for a
-- transfer), by that node's startup log: impossible, so rejected. Run once per node with a known pool
-- ($node, $pool_slots: constants, so that row groups whose highest slot is within the pool are
-- skipped unread), into page_beyond (created empty by forensics.ingest).
-- grain: one row per such event; reads: page_events, node_config; params: $node, $pool_slots
INSERT INTO page_beyond
SELECT file_id, row, node, seq, start, "end", $pool_slots
FROM page_events
WHERE "end" > $pool_slots AND CASE WHEN op = 'transfer' THEN peer ELSE node END = $node;

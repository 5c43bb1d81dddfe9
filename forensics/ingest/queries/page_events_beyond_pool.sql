-- Valid page events whose slots lie beyond the pool of the node they are in (the receiver's, for a
-- transfer), by that node's startup log: impossible, so rejected. Run once per node with a known pool
-- ($node, $pool_slots), into page_beyond (created empty by forensics.ingest; pool_node = $node).
-- grain: one row per such event; reads: page_events, node_config; params: $node, $pool_slots
-- Two branches, own events (node = $node) and transfers sent to the node (peer = $node), each a plain
-- comparison with a constant: row groups whose statistics rule it out are skipped unread (another
-- node's file; a file without transfers, whose peer is all NULL). One CASE over both read every
-- row group holding a slot beyond the smallest pool: 4.1 s against 0.5 s at 100M events.
INSERT INTO page_beyond
SELECT file_id, row, node, seq, start, "end", $pool_slots, $node, op
FROM page_events
WHERE "end" > $pool_slots AND node = $node AND op <> 'transfer'
UNION ALL
SELECT file_id, row, node, seq, start, "end", $pool_slots, $node, op
FROM page_events
WHERE "end" > $pool_slots AND peer = $node AND op = 'transfer';

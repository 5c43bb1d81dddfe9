-- Engine hazards that leaked nothing by themselves: reads of never-written slots, writes into slots the
-- writer does not hold, double allocation, frees of slots not held, reads of unallocated slots.
-- grain: node, room, kind; reads: read_provenance, room_state, anomalous_writes, room_injected, holdings,
--        alloc_overlaps; params: none
CREATE OR REPLACE TABLE hazard_segments AS
SELECT node, room, 'uninitialized_read' AS kind, seg_start, seg_end, '' AS note
FROM read_provenance WHERE cls = 'unwritten' AND NOT uncertain
UNION ALL  -- reads and frees of slots the room does not hold
SELECT node, room, CASE WHEN op = 'read' THEN 'read_unallocated' ELSE 'free_not_held' END, seg_start, seg_end, ''
FROM room_state s WHERE op IN ('read', 'free') AND NOT coalesce(a_k > coalesce(f_k, -1), false)
  -- not a hazard when the room's alloc may predate the replay window (no alloc of its own in it)
  AND NOT (a_k IS NULL AND EXISTS (SELECT 1 FROM seq_gaps g WHERE g.node = s.node AND g.kind = 'window_start'))
UNION ALL  -- writes into slots the writer does not hold; who held them, if anyone
SELECT w.node, w.room, 'write_after_free', w.seg_start, w.seg_end,
       CASE WHEN w.op = 'xfer' THEN 'transfer' ELSE 'write' END || ' while '
       || coalesce((SELECT 'room ' || string_agg(DISTINCT j.holder::VARCHAR, ', ' ORDER BY j.holder::VARCHAR) || ' held them'
                    FROM room_injected j WHERE j.node = w.node AND j.room = w.room AND j.k = w.k
                      AND j.start < w.seg_end AND j."end" > w.seg_start), 'nobody held them')
FROM anomalous_writes w WHERE NOT w.held
UNION ALL  -- allocations of slots another room still held (alloc_overlaps, from the ownership stage)
SELECT node, room, 'double_alloc', greatest(x_start, h_start), least(x_end, h_end), 'held by room ' || h_room
FROM alloc_overlaps WHERE h_node = node AND h_room <> room AND h_start < x_end AND h_end > x_start;

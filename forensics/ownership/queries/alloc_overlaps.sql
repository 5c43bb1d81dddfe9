-- Allocations of slots another room still held (double allocation): the inequality join alone, in
-- its own statement so the planner keeps it; the node and slot filters follow in the readers.
-- grain: alloc x overlapping holding; reads: room_state, holdings; params: none
CREATE OR REPLACE TABLE alloc_overlaps AS
SELECT x.node, x.room, x.seg_start AS x_start, x.seg_end AS x_end, h.node AS h_node, h.room AS h_room,
       h.seg_start AS h_start, h.seg_end AS h_end
FROM (SELECT * FROM room_state WHERE op = 'alloc') x JOIN holdings h ON h.kg_a < x.kg AND h.kg_f > x.kg;

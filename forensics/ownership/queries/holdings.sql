-- Who holds which slots when: every allocated piece of a room, from its alloc to its next free of
-- that piece (nf_k from the room replay; open-ended if never freed), keyed by kg (node-offset event
-- rank) for one inequality join.
-- grain: node, room, rseg, a_k; reads: room_state, node_index; params: none
CREATE OR REPLACE TABLE holdings AS
SELECT s.node, s.room, s.seg_start, s.seg_end, s.k AS a_k, s.nf_k AS f_k, s.kg AS kg_a,
       coalesce(s.nf_kg, node_end(x.base)) AS kg_f
FROM room_state s JOIN node_index x USING (node)
WHERE s.op = 'alloc';

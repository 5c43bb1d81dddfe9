-- Who holds which slots when: every allocated piece of a room, from its alloc to its next free
-- (open-ended if never freed), keyed by kg (node-offset event rank) for one inequality join.
-- grain: node, room, rseg, a_k; reads: room_state, node_index; params: none
CREATE OR REPLACE TABLE holdings AS
SELECT h.node, h.room, h.seg_start, h.seg_end, h.a_k, h.f_k, h.kg_a, coalesce(h.kg_f, x.base + 1099511627775) AS kg_f
FROM (
    SELECT node, room, op, seg_start, seg_end, k AS a_k, kg AS kg_a,
           first_value(CASE WHEN op = 'free' THEN k END IGNORE NULLS) OVER w AS f_k,
           first_value(CASE WHEN op = 'free' THEN kg END IGNORE NULLS) OVER w AS kg_f
    FROM room_state WHERE op IN ('alloc', 'free')
    WINDOW w AS (PARTITION BY node, room, rseg ORDER BY k ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
) h JOIN node_index x USING (node)
WHERE h.op = 'alloc';

-- Reads whose content predates their room's allocation (no own or injected write since their alloc):
-- placeholders, shares, reads of unallocated slots; their content is the node's last write before the
-- read, found by history_direct/ (screened run) or history_search/ + history_cand.sql (full
-- replay), which also sets qidx. Item ids count per node from its base: no dependence on other nodes.
-- grain: item; reads: room_state, node_index; params: none
CREATE OR REPLACE TABLE history_items AS
WITH r AS (
    SELECT node, room, op, k, pos, ts, a_k, f_k, seg_start AS s, seg_end AS e
    FROM room_state
    WHERE op IN ('read', 'share') AND NOT coalesce(w_k > a_k, false) AND NOT coalesce(i_k > a_k, false)
)
SELECT x.base + row_number() OVER (PARTITION BY r.node ORDER BY r.k, r.room, r.s) AS item, r.*,
       NULL::BIGINT AS qidx
FROM r JOIN node_index x USING (node);

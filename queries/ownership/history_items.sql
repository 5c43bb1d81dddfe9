-- Reads whose content predates their room's allocation (no own or injected write since their alloc):
-- placeholders, shares, reads of unallocated slots; their content is the node's last write before the
-- read (history_cand + forensics.envelope). Also the node's writes, numbered in order (widx), and each
-- item's position there (qidx). Item ids count per node from its base: no dependence on other nodes.
-- grain: item (history_items), node+widx (history_writes); reads: room_state, timeline, node_index; params: none
CREATE OR REPLACE TEMP TABLE history_writes AS
SELECT node, k, pos, room, start, "end", ambiguous, ts, op, src, sender,
       (row_number() OVER (PARTITION BY node ORDER BY k) - 1)::BIGINT AS widx
FROM timeline WHERE op IN ('write', 'xfer');

CREATE OR REPLACE TABLE history_items AS
WITH r AS (
    SELECT node, room, op, k, pos, ts, a_k, f_k, seg_start AS s, seg_end AS e
    FROM room_state
    WHERE op IN ('read', 'share') AND NOT coalesce(w_k > a_k, false) AND NOT coalesce(i_k > a_k, false)
), q AS (
    SELECT r.*, coalesce(w.widx + 1, 0) AS qidx
    FROM r ASOF LEFT JOIN history_writes w ON w.node = r.node AND w.k < r.k
)
SELECT x.base + row_number() OVER (PARTITION BY q.node ORDER BY q.k, q.room, q.s) AS item, q.*
FROM q JOIN node_index x USING (node);

CREATE OR REPLACE TABLE history_open AS SELECT item, s, e FROM history_items;
CREATE OR REPLACE TABLE history_found (item BIGINT, s BIGINT, e BIGINT, w_room BIGINT, w_k BIGINT,
    w_amb BOOLEAN, w_ts TIMESTAMPTZ);

-- the writers, looked up without a pass over every column of the timeline: the node's own writes by
-- seq (k = seq * 2 * 2^20, as in timeline_view.sql), the transfers that landed in timeline_xfer by
-- (pos, sub) (k = pos * 2^20 + sub, pos odd)
-- grain: node, k (a write a history part names); reads: history_parts, page_events, timeline_xfer; params: none
-- scratch: history_writers
CREATE OR REPLACE TEMP TABLE history_writers AS
WITH keys AS (SELECT DISTINCT node, w_k FROM history_parts WHERE w_k IS NOT NULL)
SELECT e.node, own_key(e.seq) AS k, e.room, false AS ambiguous, e.ts
FROM page_events e
SEMI JOIN (SELECT node, key_seq(w_k) AS seq FROM keys WHERE NOT is_landed(w_k)) USING (node, seq)
WHERE e.op <> 'transfer'
UNION ALL
SELECT x.node, kv_key(x.pos, x.sub) AS k, x.room, x.ambiguous, x.ts
FROM timeline_xfer x
SEMI JOIN (SELECT node, key_pos(w_k) AS pos, key_sub(w_k) AS sub FROM keys WHERE is_landed(w_k))
     USING (node, pos, sub);

-- The timeline as a view (every node's rank fits, see timeline/): nothing is copied.
-- grain: node, pos, sub; reads: page_events, timeline_xfer, timeline_keys; params: none
CREATE OR REPLACE VIEW timeline AS
SELECT e.node, own_pos(e.seq) AS pos, 0::BIGINT AS sub, e.op, e.room, e.start, e."end", e.ts, e.ts AS ts_hi, e.src,
       NULL::VARCHAR AS sender, NULL::BIGINT AS xseq, false AS ambiguous,
       own_key(e.seq) AS k, n.base + (own_pos(e.seq) - n.lo_pos) * n.stride + 1 AS kg
FROM page_events e JOIN timeline_keys n USING (node)
WHERE e.op <> 'transfer'
UNION ALL
SELECT x.*, kv_key(x.pos, x.sub) AS k, n.base + (x.pos - n.lo_pos) * n.stride + x.sub + 1 AS kg
FROM timeline_xfer x JOIN timeline_keys n USING (node);

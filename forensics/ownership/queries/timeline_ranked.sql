-- The timeline as a table with a dense per-node rank, for a node whose seq span is too wide for the
-- sort-free rank (see timeline/).
-- grain: node, pos, sub; reads: page_events, timeline_xfer, timeline_keys; params: none
CREATE OR REPLACE TABLE timeline AS
WITH e AS (
    SELECT node, own_pos(seq) AS pos, 0::BIGINT AS sub, op, room, start, "end", ts, ts AS ts_hi, src,
           NULL::VARCHAR AS sender, NULL::BIGINT AS xseq, false AS ambiguous
    FROM page_events WHERE op <> 'transfer'
    UNION ALL
    SELECT * FROM timeline_xfer
)
SELECT e.*, kv_key(e.pos, e.sub) AS k,
       n.base + row_number() OVER (PARTITION BY e.node ORDER BY e.pos, e.sub) AS kg
FROM e JOIN timeline_keys n USING (node);

-- Step 4 of prov_stale: makes prov_stale_events.
-- grain: node, k (an event, read whole); reads: page_events, prov_stale_seqs, timeline_xfer, prov_stale_keys; params: none
-- scratch: prov_stale_events
CREATE OR REPLACE TEMP TABLE prov_stale_events AS
SELECT e.node, own_key(e.seq) AS k, own_pos(e.seq) AS pos, e.op, e.room, e.start, e."end", e.src,
       NULL::VARCHAR AS sender, e.ts, e.ts AS ts_hi
FROM page_events e SEMI JOIN prov_stale_seqs USING (node, seq)
WHERE e.op <> 'transfer'
UNION ALL
SELECT x.node, kv_key(x.pos, x.sub) AS k, x.pos, x.op, x.room, x.start, x."end", x.src, x.sender, x.ts, x.ts_hi
FROM timeline_xfer x
SEMI JOIN (SELECT node, key_pos(k) AS pos, key_sub(k) AS sub FROM prov_stale_keys WHERE is_landed(k))
     USING (node, pos, sub);

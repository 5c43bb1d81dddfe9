-- Step 3 of prov_stale: makes prov_stale_seqs.
-- grain: node, seq (an own event to read whole); reads: page_events, prov_stale_keys, prov_stale_reads; params: none
-- scratch: prov_stale_seqs
CREATE OR REPLACE TEMP TABLE prov_stale_seqs AS
SELECT node, seq FROM page_events
SEMI JOIN (SELECT node, key_seq(k) AS seq FROM prov_stale_keys WHERE NOT is_landed(k)) USING (node, seq)
UNION
SELECT node, seq FROM page_events
SEMI JOIN (SELECT DISTINCT node, w_room AS room FROM prov_stale_reads) USING (node, room)
WHERE op = 'free';

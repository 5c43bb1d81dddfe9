-- the timeline events those rows name (reads, writes, allocs, the writers' frees). Reading every
-- column of every event costs a full scan (8 s at 100M events), so the node's own events are found
-- on two narrow columns first (seq by key; op and room for the frees), then read whole by seq; the
-- transfers that landed come from timeline_xfer. Keys and positions as in timeline_view.sql: own
-- event k = seq * 2 * 2^20 (pos = 2 * seq); a landed transfer k = pos * 2^20 + sub (pos odd).
-- grain: node, k (an event a stale read's row names); reads: prov_stale_reads; params: none
-- scratch: prov_stale_keys
CREATE OR REPLACE TEMP TABLE prov_stale_keys AS
SELECT DISTINCT node, k FROM (
    SELECT node, k FROM prov_stale_reads UNION ALL SELECT node, w_k FROM prov_stale_reads
    UNION ALL SELECT node, a_k FROM prov_stale_reads)
WHERE k IS NOT NULL;

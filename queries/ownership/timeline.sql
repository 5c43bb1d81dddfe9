-- One ordered event stream per node: its own events at pos = 2*seq, and every transfer into its pool
-- at pos = 2*seq_lo + 1 (right after the last event it surely followed), ordered among themselves by
-- the sender's clock. Transfers are op 'xfer' on the receiver.
-- k = pos * 2^20 + sub is the single ordering key within a node.
-- grain: node, pos, sub; reads: page_events, transfer_landing; params: none
CREATE OR REPLACE TABLE timeline AS
SELECT t.*, t.pos * 1048576 + t.sub AS k,
       x.base + row_number() OVER (PARTITION BY t.node ORDER BY t.pos, t.sub) AS kg FROM (
SELECT node, seq * 2 AS pos, 0 AS sub, op, room, start, "end", ts, ts AS ts_hi, src, NULL::VARCHAR AS sender,
       NULL::BIGINT AS xseq, false AS ambiguous
FROM page_events WHERE op <> 'transfer'
UNION ALL
SELECT receiver, seq_lo * 2 + 1,
       row_number() OVER (PARTITION BY receiver, seq_lo ORDER BY xts, sender, xseq),
       'xfer', room, start, "end", land_lo, land_hi, 'transfer', sender, xseq, ambiguous
FROM transfer_landing) t JOIN node_index x USING (node);

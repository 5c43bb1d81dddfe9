-- One ordered event stream per node: its own events at pos = 2*seq, and every transfer into its pool
-- at pos = 2*seq_lo + 1 (right after the last event it surely followed), ordered among themselves by
-- the sender's clock. Transfers are op 'xfer' on the receiver.
-- k = pos * 2^20 + sub is the single ordering key within a node; kg = base + rank, for range joins.
-- grain: node, pos, sub; reads: page_events, transfer_landing, node_index; params: none
CREATE OR REPLACE TEMP TABLE timeline_events AS
SELECT node, seq * 2 AS pos, 0 AS sub, op, room, start, "end", ts, ts AS ts_hi, src, NULL::VARCHAR AS sender,
       NULL::BIGINT AS xseq, false AS ambiguous
FROM page_events WHERE op <> 'transfer'
UNION ALL
SELECT receiver, seq_lo * 2 + 1,
       row_number() OVER (PARTITION BY receiver, seq_lo ORDER BY xts, sender, xseq),
       'xfer', room, start, "end", land_lo, land_hi, 'transfer', sender, xseq, ambiguous
FROM transfer_landing;

-- The rank needs no sort: (pos - lowest pos) * (most transfers at one pos + 1) + sub orders a node's
-- events as (pos, sub) does, and stays below 2^40 - 1 (the open end of a holding) for any realistic
-- seq span; a node where it would not falls back to a dense rank.
CREATE OR REPLACE TEMP TABLE timeline_keys AS
SELECT e.node, any_value(x.base) AS base, min(e.pos) AS lo_pos, max(e.sub) + 1 AS s,
       ((max(e.pos) - min(e.pos) + 1)::HUGEINT * (max(e.sub) + 1) + 1) < 1099511627775 AS fits
FROM timeline_events e JOIN node_index x USING (node) GROUP BY e.node;

CREATE OR REPLACE TABLE timeline AS
SELECT e.*, e.pos * 1048576 + e.sub AS k, n.base + (e.pos - n.lo_pos) * n.s + e.sub + 1 AS kg
FROM timeline_events e JOIN timeline_keys n USING (node) WHERE n.fits
UNION ALL
SELECT e.*, e.pos * 1048576 + e.sub AS k, n.base + row_number() OVER (PARTITION BY e.node ORDER BY e.pos, e.sub) AS kg
FROM timeline_events e JOIN timeline_keys n USING (node) WHERE NOT n.fits;

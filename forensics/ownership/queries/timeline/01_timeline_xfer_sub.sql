-- Keys of each node's ordered event stream: its own events at pos = 2*seq, every transfer into its
-- pool at pos = 2*seq_lo + 1 (right after the last event it surely followed; op 'xfer', in
-- timeline_xfer). k = pos * 2^20 + sub orders a node.
-- grain: node, pos, sub (timeline_xfer), shared transfer (timeline_xfer_sub), node (timeline_keys);
--        reads: telemetry_nodes, transfer_landing,
--        node_index; params: none
-- kg = base + rank, for range joins. The rank needs no sort: (pos - lowest pos) * (most transfers at
-- one pos + 1) + sub orders a node's events as (pos, sub) does, and stays below 2^40 - 1 (the open end
-- of a holding) for any realistic seq span (`fits`). forensics.nodework makes `timeline` a view over
-- page_events and timeline_xfer when every node fits (timeline_view.sql), else a table with a dense
-- rank (timeline_ranked.sql). max_end: the highest slot end of the node's timeline.
-- sub: a transfer alone at its (receiver, seq_lo) is 1; those that share one are ranked by the start of
-- their landing windows on the receiver's clock (never by a sender's own clock: sender clocks differ by
-- up to seconds), which agrees with every order the windows prove (forensics.conflicts finds the pairs
-- whose order nothing proves and the findings treat both orders as possible). Only those are ranked, in
-- timeline_xfer_sub (a window over every transfer sorted them all: 90M at 1B events, where almost
-- every rank is 1). timeline_xfer is a view over transfer_landing and that table, not a copy: storing
-- the 9M transfers of 100M events again cost 3-4 s (90M at 1B), and each read of it filters them anyway.
-- (sender, xseq) names a transfer: the sender's event.
CREATE OR REPLACE TABLE timeline_xfer_sub AS
WITH shared AS (SELECT receiver, seq_lo FROM transfer_landing GROUP BY ALL HAVING count(*) > 1)
SELECT t.sender, t.xseq, row_number() OVER (PARTITION BY t.receiver, t.seq_lo ORDER BY t.land_lo NULLS LAST, t.sender, t.xseq) AS sub
FROM transfer_landing t
SEMI JOIN shared s ON s.receiver IS NOT DISTINCT FROM t.receiver AND s.seq_lo IS NOT DISTINCT FROM t.seq_lo;

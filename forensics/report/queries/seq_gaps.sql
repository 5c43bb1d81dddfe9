-- Lost page events: seq jumps per node, with the stamps on either side.
-- grain: node, prev_seq; reads: seq_gaps; params: none
SELECT node, prev_seq, next_seq, missing, prev_ts, next_ts FROM seq_gaps ORDER BY node, prev_seq;

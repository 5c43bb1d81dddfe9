-- Lost events: a jump in a node's seq (kind 'lost'). Lost events lie at positions strictly between
-- prev_pos and next_pos. A replay window (--since) adds one 'window_start' gap per node before its
-- first event in the window: whatever happened before is unknown to this run, like lost events.
-- grain: node, prev_seq; reads: seq_jumps (ingest), page_events, replay_window; params: none
CREATE OR REPLACE TABLE seq_gaps AS
SELECT j.node, j.prev_seq, j.next_seq, j.next_seq - j.prev_seq - 1 AS missing,
       own_pos(j.prev_seq) AS prev_pos, own_pos(j.next_seq) AS next_pos, a.ts AS prev_ts, b.ts AS next_ts, 'lost' AS kind
FROM seq_jumps j  -- forensics.ingest.seqs: consecutive seqs of a node more than 1 apart
JOIN page_events a ON a.node = j.node AND a.seq = j.prev_seq
JOIN page_events b ON b.node = j.node AND b.seq = j.next_seq
UNION ALL
SELECT p.node, min(p.seq) - 1, min(p.seq), NULL, -1, own_pos(min(p.seq)), any_value(w.since), arg_min(p.ts, p.seq),
       'window_start'
FROM page_events p, replay_window w WHERE w.since IS NOT NULL GROUP BY p.node;

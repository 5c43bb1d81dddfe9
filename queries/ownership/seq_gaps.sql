-- Lost events: a jump in a node's seq (kind 'lost'). Lost events lie at positions strictly between
-- prev_pos and next_pos. A replay window (--since) adds one 'window_start' gap per node before its
-- first event in the window: whatever happened before is unknown to this run, like lost events.
-- grain: node, prev_seq; reads: page_events, replay_window; params: none
CREATE OR REPLACE TABLE seq_gaps AS
SELECT node, prev_seq, seq AS next_seq, seq - prev_seq - 1 AS missing,
       prev_seq * 2 AS prev_pos, seq * 2 AS next_pos, prev_ts, ts AS next_ts, 'lost' AS kind
FROM (SELECT node, seq, ts, lag(seq) OVER w AS prev_seq, lag(ts) OVER w AS prev_ts
      FROM page_events WINDOW w AS (PARTITION BY node ORDER BY seq))
WHERE seq - prev_seq > 1
UNION ALL
SELECT p.node, min(p.seq) - 1, min(p.seq), NULL, -1, min(p.seq) * 2, any_value(w.since), arg_min(p.ts, p.seq),
       'window_start'
FROM page_events p, replay_window w WHERE w.since IS NOT NULL GROUP BY p.node;

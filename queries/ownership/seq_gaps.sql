-- Lost events: a jump in a node's seq. Lost events lie at positions strictly between prev_pos and next_pos.
-- grain: node, prev_seq; reads: page_events; params: none
CREATE OR REPLACE TABLE seq_gaps AS
SELECT node, prev_seq, seq AS next_seq, seq - prev_seq - 1 AS missing,
       prev_seq * 2 AS prev_pos, seq * 2 AS next_pos, prev_ts, ts AS next_ts
FROM (SELECT node, seq, ts, lag(seq) OVER w AS prev_seq, lag(ts) OVER w AS prev_ts
      FROM page_events WINDOW w AS (PARTITION BY node ORDER BY seq))
WHERE seq - prev_seq > 1;

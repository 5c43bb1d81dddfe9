-- Set-up of the windowed last-writer search (investigate --full-replay): the node's writes, numbered
-- in order (widx), and each history item's position among them (qidx); every item starts open.
-- grain: node+widx (history_writes), item (history_items); reads: timeline, history_items; params: none
CREATE OR REPLACE TEMP TABLE history_writes AS
SELECT node, k, pos, room, start, "end", ambiguous, ts, op, src, sender,
       (row_number() OVER (PARTITION BY node ORDER BY k) - 1)::BIGINT AS widx
FROM timeline WHERE op IN ('write', 'xfer');

-- Events whose slots lie beyond the node's KV pool (as its startup log states it) cannot be real.
-- grain: one row per such event; reads: page_events, node_config; params: none
CREATE OR REPLACE TEMP TABLE page_beyond AS
SELECT p.file_id, p.row, p.node, p.seq, p.start, p."end", c.pool_slots
FROM page_events p
JOIN (SELECT node, (pool_tokens // page_size + 1) * page_size AS pool_slots
      FROM node_config WHERE pool_tokens IS NOT NULL AND page_size IS NOT NULL) c
  ON p.node = c.node AND p.op <> 'transfer' AND p."end" > c.pool_slots
UNION ALL
SELECT p.file_id, p.row, p.node, p.seq, p.start, p."end", c.pool_slots
FROM page_events p
JOIN (SELECT node, (pool_tokens // page_size + 1) * page_size AS pool_slots
      FROM node_config WHERE pool_tokens IS NOT NULL AND page_size IS NOT NULL) c
  ON p.peer = c.node AND p.op = 'transfer' AND p."end" > c.pool_slots;

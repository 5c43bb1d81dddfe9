-- Events whose slots lie beyond the node's KV pool (as its startup log states it) cannot be real.
-- A transfer's slots are in its peer's pool, every other event's in its own node's.
-- grain: one row per such event; reads: page_events, node_config; params: none
CREATE OR REPLACE TEMP TABLE page_beyond AS
WITH pools AS (
    SELECT node, (pool_tokens // page_size + 1) * page_size AS pool_slots
    FROM node_config WHERE pool_tokens IS NOT NULL AND page_size IS NOT NULL
)
SELECT p.file_id, p.row, p.node, p.seq, p.start, p."end", c.pool_slots
FROM page_events p
JOIN pools c ON c.node = CASE WHEN p.op = 'transfer' THEN p.peer ELSE p.node END AND p."end" > c.pool_slots;

-- Per node: what its engine logs say about its role and pool (the pool rule's, node_config), and how many
-- page events it logged (the command's summary and manifest.json's nodes).
-- grain: node; reads: node_config, page_events; params: none
WITH n AS (SELECT node FROM node_config UNION SELECT DISTINCT node FROM page_events)
SELECT n.node, c.role, c.pool_tokens, c.page_size, c.context_len,
       (SELECT count(*) FROM page_events p WHERE p.node = n.node) AS page_events
FROM n LEFT JOIN node_config c USING (node) ORDER BY n.node

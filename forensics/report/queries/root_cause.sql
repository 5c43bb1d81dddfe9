-- Per node: KV pool size (the pool rule's, node_config) against context length, and SGLang's maximum input
-- length (node_limits; none for a node of another engine, whose start-up facts alone are read). A pool
-- below the context length is the root cause.
-- grain: node; reads: node_config, node_limits; params: none
SELECT node, any_value(role ORDER BY line) AS role, any_value(context_len ORDER BY line) AS context_len,
       any_value(pool_tokens ORDER BY line) AS pool_tokens,
       any_value(page_size ORDER BY line) AS page_size,
       any_value(l.max_in) AS max_input_len, any_value(engine ORDER BY line) AS engine
FROM node_config LEFT JOIN node_limits l USING (node) GROUP BY node ORDER BY node;

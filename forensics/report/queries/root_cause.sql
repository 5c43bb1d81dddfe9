-- Per node: KV pool size against context length, and SGLang's derived maximum input length
-- min(context_len - 1, pool - 1) - 5 (tp_worker.py). A pool below the context length is the root cause.
-- grain: node; reads: node_config; params: none
SELECT node, any_value(role ORDER BY line) AS role, any_value(context_len ORDER BY line) AS context_len,
       any_value(coalesce(pool_tokens, max_total_num_tokens) ORDER BY line) AS pool_tokens,
       any_value(page_size ORDER BY line) AS page_size,
       least(any_value(context_len ORDER BY line) - 1,
             any_value(coalesce(pool_tokens, max_total_num_tokens) ORDER BY line) - 1) - 5 AS max_input_len
FROM node_config GROUP BY node ORDER BY node;

-- Per prefill/decode pair the router used: the leak window [prefill limit, decode limit) of prompt
-- lengths that prefill replaces with a placeholder while decode accepts them (the macros
-- node_limits and in_leak_window: forensics.engines.sglang), and the requests whose prompt fell in it.
-- grain: prefill_node, decode_node; reads: gateway, node_limits; params: none
SELECT g.prefill_node, g.decode_node, p.max_in AS window_start, d.max_in AS window_end,
       CASE WHEN p.max_in < d.max_in THEN 'yes' ELSE 'no' END AS open, count(*) AS requests,
       count(*) FILTER (WHERE in_leak_window(g.prompt_tokens, p.max_in, d.max_in)) AS requests_in_window
FROM gateway g LEFT JOIN node_limits p ON p.node = g.prefill_node LEFT JOIN node_limits d ON d.node = g.decode_node
WHERE g.prefill_node IS NOT NULL AND g.decode_node IS NOT NULL
GROUP BY ALL ORDER BY g.prefill_node, g.decode_node;

-- Served requests whose decode node has no page telemetry and runs an engine whose lines the logs-only
-- rules do not read (logs_decide: the placeholder signature and the transfer failures are SGLang's
-- lines; a vLLM node's request lines name no room and no placeholder). Nothing in the evidence decides
-- whether such a response attended another request's KV, so it is indeterminate, never clean
-- (affected_responses), its reason naming the node and its engine.
-- grain: request_id, node; reads: gateway, node_config, telemetry_nodes, replay_window; params: none
CREATE OR REPLACE TABLE unread_responses AS
SELECT DISTINCT g.request_id, g.decode_node AS node,
       'no page events, and the logs-only rules read no ' || c.engine
       || ' line (its request lines carry no placeholder or failed-transfer signature): the evidence cannot clear this response' AS reason
FROM gateway g
JOIN node_config c ON c.node = g.decode_node
CROSS JOIN replay_window w
WHERE NOT logs_decide(c.engine)
  AND g.decode_node NOT IN (SELECT node FROM telemetry_nodes)
  AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
  AND (g.ts IS NULL OR (g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ)
                        AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)));

-- Served requests whose decode node has no page telemetry and runs an engine whose lines the logs-only
-- rules do not read (logs_decide: the placeholder signature and the transfer failures are SGLang's
-- lines; a vLLM node's request lines name no room and no placeholder). Nothing in the evidence decides
-- whether such a response attended another request's KV, so it is indeterminate, never clean
-- (affected_responses), its reason naming the node and its engine.
-- A served request whose gateway record names no decode node (a gateway that logs none, and no engine
-- line that the join reads names the request: vLLM's lines name no room, and a gateway's own ids need
-- not reach the engine) may have been served by any such node that decodes (its role not prefill):
-- a row per such node, since which one served it is not in the evidence. node_named: whether the
-- gateway record named the node (false: it may have served it).
-- grain: request_id, node; reads: gateway, node_config, telemetry_nodes, replay_window; params: none
CREATE OR REPLACE TABLE unread_responses AS
WITH unread AS (  -- decode nodes without page events whose engine's lines no logs-only rule reads
    SELECT node, engine, coalesce(role, '') AS role FROM node_config
    WHERE NOT logs_decide(engine) AND node NOT IN (SELECT node FROM telemetry_nodes)
), served AS (
    SELECT g.request_id, g.decode_node
    FROM gateway g CROSS JOIN replay_window w
    WHERE (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
      AND (g.ts IS NULL OR (g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ)
                            AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)))
)
SELECT DISTINCT s.request_id, s.decode_node AS node,
       'no page events, and the logs-only rules read no ' || u.engine
       || ' line (its request lines carry no placeholder or failed-transfer signature): the evidence cannot clear this response' AS reason,
       true AS node_named
FROM served s JOIN unread u ON u.node = s.decode_node
UNION
SELECT DISTINCT s.request_id, u.node,
       'the gateway record names no decode node and no engine line read names the request; ' || u.node
       || ' may have served it, with no page events, and the logs-only rules read no ' || u.engine
       || ' line (its request lines carry no placeholder or failed-transfer signature): the evidence cannot clear this response',
       false
FROM served s CROSS JOIN unread u
WHERE s.decode_node IS NULL AND u.role <> 'prefill';

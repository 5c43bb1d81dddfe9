-- Per node: does it have page telemetry, how many events were lost, how many served responses it
-- handled and how many of those the evidence decides (not indeterminate).
-- grain: node; reads: gateway, node_config, telemetry_nodes, seq_gaps, affected_responses; params: none
CREATE OR REPLACE TABLE coverage AS
WITH nodes AS (
    SELECT node FROM node_config UNION SELECT node FROM telemetry_nodes
    UNION SELECT decode_node FROM gateway WHERE decode_node IS NOT NULL
    UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
), indeterminate AS (
    SELECT DISTINCT request_id FROM affected_responses WHERE status = 'indeterminate'
), served AS (  -- counted per node in one pass (a per-node subquery over every served request ran out
                -- of memory at 90M requests)
    SELECT n.node, count(*) AS served, count(*) FILTER (WHERE i.request_id IS NULL) AS verified
    FROM gateway g
    CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n
    LEFT JOIN indeterminate i ON i.request_id = g.request_id
    WHERE n.node IS NOT NULL AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
    GROUP BY n.node
)
SELECT n.node, coalesce(c.role, 'unknown') AS role,
       CASE WHEN t.node IS NULL THEN 'no' ELSE 'yes' END AS page_telemetry,
       (SELECT count(*) FROM seq_gaps g WHERE g.node = n.node AND g.kind = 'lost') AS seq_gaps,
       coalesce((SELECT sum(missing) FROM seq_gaps g WHERE g.node = n.node), 0)::BIGINT AS events_lost,
       coalesce(s.served, 0) AS responses_served,
       CASE WHEN t.node IS NULL THEN 0 ELSE coalesce(s.verified, 0) END AS responses_verified,
       coalesce(t.events, 0) AS page_events
FROM nodes n LEFT JOIN node_config c USING (node) LEFT JOIN telemetry_nodes t USING (node)
LEFT JOIN served s USING (node);

-- Served requests whose evidence a log outage (log_outages) may have taken: routed to the node in a
-- role that evidence decides, their span [ts - duration, ts + duration] meeting the outage. Page events
-- decide every request of a node with page telemetry (as decode or prefill); the engine log decides the
-- requests of a decode node without page telemetry (the placeholder signature: its decode lines, and
-- its prefill node's placeholder lines). A response here is indeterminate, never clean (affected_responses).
-- grain: request_id, node, source; reads: log_outages, gateway, telemetry_nodes, replay_window; params: none
CREATE OR REPLACE TABLE outage_responses AS
SELECT DISTINCT g.request_id, o.node, o.source,
       'served while ' || o.node || '''s ' || CASE o.source WHEN 'engine_log' THEN 'engine log' ELSE 'page events' END
       || ' has an outage (' || strftime(o.gap_from, '%Y-%m-%dT%H:%M:%SZ') || ' to '
       || strftime(o.gap_to, '%Y-%m-%dT%H:%M:%SZ') || '): its evidence may be lost' AS reason
FROM log_outages o
JOIN gateway g ON o.node IN (g.decode_node, g.prefill_node)
CROSS JOIN replay_window w
WHERE g.bootstrap_room IS NOT NULL AND g.ts IS NOT NULL
  AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
  AND g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
  AND g.ts + to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) >= o.gap_from
  AND g.ts - to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) <= o.gap_to
  AND (o.source = 'pages'
       OR (g.decode_node IS NOT NULL AND g.decode_node NOT IN (SELECT node FROM telemetry_nodes)));

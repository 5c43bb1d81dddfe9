-- Placeholder signature on decode nodes without page telemetry: prefill replaced the prompt with one
-- token (over-length line, or input len 1 / prompt_tokens 1) while the request carried more tokens,
-- and decode served it. Decode then attended pages nobody wrote for it; whose, the logs cannot say.
-- grain: request_id; reads: gateway, engine_requests, telemetry_nodes, request_cohort, replay_window; params: none
CREATE OR REPLACE TABLE signature_responses AS
WITH prefill_rooms AS (  -- rid -> room on the prefill node, then the over-length rid to its room
    SELECT node, rid, any_value(room) AS room FROM engine_requests
    WHERE room IS NOT NULL AND kind IN ('time_stats', 'finished') GROUP BY node, rid
), placeholder AS (
    SELECT e.node, coalesce(e.room, pr.room) AS room,
           CASE WHEN e.kind = 'overlength' THEN 'prefill logged "Input length (' || e.input_len || ' tokens) exceeds the maximum allowed length (' || e.max_input_len || ' tokens)" at line ' || e.line
                ELSE 'prefill ran the request with input length 1 (line ' || e.line || ')' END AS why
    FROM engine_requests e LEFT JOIN prefill_rooms pr ON pr.node = e.node AND pr.rid = e.rid
    WHERE e.kind = 'overlength' OR (e.kind IN ('time_stats', 'finished') AND e.input_len = 1
                                    AND coalesce(e.detail, 'prefill') NOT LIKE '%decode%')
), decode_len AS (
    SELECT node, room, max(input_len) AS decode_input FROM engine_requests
    WHERE kind IN ('time_stats', 'finished') AND room IS NOT NULL GROUP BY node, room
)
SELECT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, g.decode_node AS node,
       g.bootstrap_room AS room, g.status AS http_status, g.completion_tokens, g.ts,
       coalesce(d.decode_input, g.prompt_tokens) AS decode_input,
       string_agg(DISTINCT p.why, '; ' ORDER BY p.why) AS why
FROM gateway g
JOIN placeholder p ON p.room = g.bootstrap_room AND (g.prefill_node IS NULL OR p.node = g.prefill_node)
LEFT JOIN decode_len d ON d.node = g.decode_node AND d.room = g.bootstrap_room
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
WHERE g.decode_node IS NOT NULL AND g.decode_node NOT IN (SELECT node FROM telemetry_nodes)
  AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
  AND coalesce(d.decode_input, g.prompt_tokens, 0) > 1
  -- a replay window (--since/--until) scopes the requests received inside it
  AND g.ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
  AND g.ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
GROUP BY ALL;

-- Outages of a decode node's engine log found without the gateway's routing, for gateway formats that
-- name no decode node or room (LiteLLM, Envoy): a room a prefill node's log finished that no decode
-- node's log names (its decode side is somewhere, unlogged), at a time some decode node was silent for
-- far longer than its own rate of lines allows. The silence must be worth at least SILENCE_LINES of the
-- node's lines at its mean rate over its logged time (a Poisson silence that long has a chance under
-- e^-10 = 5e-5): an idle moment of a busy node, or a quiet node's usual spacing, is no outage. Every
-- decode node silent then gets a row (which one the room went to is unknown). Rooms the gateway routes
-- with a decode node are log_outages' own.
-- grain: node, gap_from; reads: engine_requests, node_config, gateway, log_outages, replay_window;
--        params: none
INSERT INTO log_outages
WITH decode AS (
    SELECT e.node, count(*) / greatest(epoch(max(e.ts)) - epoch(min(e.ts)), 1) AS rate
    FROM engine_requests e
    WHERE e.ts IS NOT NULL AND e.node IN (SELECT node FROM node_config WHERE role = 'decode')
    GROUP BY e.node HAVING count(*) > 1
), unrouted AS (  -- finished on a prefill node, named by no decode node's log, routed by no gateway record
    SELECT e.room, min(e.ts) AS ts
    FROM engine_requests e CROSS JOIN replay_window w
    WHERE e.kind IN ('time_stats', 'finished') AND e.room IS NOT NULL AND e.ts IS NOT NULL
      AND e.node IN (SELECT node FROM node_config WHERE role = 'prefill')
      AND e.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND e.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
      AND e.room NOT IN (SELECT room FROM engine_requests
                         WHERE room IS NOT NULL AND node IN (SELECT node FROM decode))
      AND e.room NOT IN (SELECT bootstrap_room FROM gateway
                         WHERE bootstrap_room IS NOT NULL AND decode_node IS NOT NULL)
    GROUP BY e.room
), seconds AS (
    SELECT DISTINCT node, date_trunc('second', ts) AS t FROM engine_requests
    WHERE ts IS NOT NULL AND node IN (SELECT node FROM decode)
), candidate AS (  -- each decode node's evidence either side of each such room
    SELECT u.room, d.node, d.rate, b.t AS before_t,
           (SELECT min(a.t) FROM seconds a WHERE a.node = d.node AND a.t > u.ts) AS after_t
    FROM unrouted u CROSS JOIN decode d
    ASOF LEFT JOIN seconds b ON b.node = d.node AND b.t <= u.ts
), silent AS (
    SELECT node, before_t, after_t, count(*) AS rooms FROM candidate
    WHERE before_t IS NOT NULL AND after_t IS NOT NULL
      AND rate * (epoch(after_t) - epoch(before_t) - 1) >= 10  -- SILENCE_LINES
    GROUP BY node, before_t, after_t
)
SELECT s.node, 'engine_log', s.before_t + INTERVAL 1 SECOND, s.after_t, s.rooms,
       (SELECT count(*) FROM engine_requests e WHERE e.node <> s.node AND e.ts >= s.before_t AND e.ts < s.after_t),
       s.rooms || ' room(s) a prefill node finished between ' || strftime(s.before_t, '%Y-%m-%dT%H:%M:%SZ')
       || ' and ' || strftime(s.after_t, '%Y-%m-%dT%H:%M:%SZ') || ' are named by no decode node''s log, and '
       || s.node || ' logged nothing in that time, far longer than its rate of lines allows (the gateway names '
       || 'no decode node: which node each room went to is unknown)'
FROM silent s
WHERE NOT EXISTS (SELECT 1 FROM log_outages o WHERE o.node = s.node AND o.source = 'engine_log'
                  AND o.gap_from < s.after_t AND o.gap_to > s.before_t)

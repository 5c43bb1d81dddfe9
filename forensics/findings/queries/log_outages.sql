-- Outages of a node's logs, found against the traffic the gateway saw: a time in which the gateway
-- routed served requests to the node (as decode or prefill) whose rooms the node's evidence never
-- names, while the node logged nothing. Per evidence: `engine_log` (its request lines,
-- engine_requests) and `pages` (its page events, on nodes with page telemetry: node_missing holds the
-- requests whose room it never names). A request spans [ts - duration, ts + duration] on the gateway's
-- clock (a format logs the request's start or its end), widened by how far the node's evidence of the
-- rooms it does name lies outside their spans (its clock's offset); the node's evidence is taken by
-- the second it falls in. A request whose room is missing and whose whole span holds no second of the
-- node's evidence seeds an outage: from the node's last second of evidence before it to the end of
-- its first second of evidence after it (the silence and the two seconds around it: what was lost
-- lies inside). An idle node (nothing routed to it) or its usual spacing of lines (every routed room
-- logged) gives no row. requests_in_gap: the missing requests whose span meets the outage.
-- other_lines: what the other nodes logged of the same evidence in that time.
-- grain: node, source, gap_from; reads: gateway, engine_requests, page_events, node_missing,
--        telemetry_nodes, replay_window; params: none
CREATE OR REPLACE TABLE log_outages AS
WITH routed AS (  -- served requests routed to a node, in the replay window
    SELECT g.file_id, g.row, g.request_id, n.node, g.bootstrap_room AS room,
           g.ts - to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) AS lo,
           g.ts + to_microseconds((coalesce(g.duration_ms, 0) * 1000)::BIGINT) AS hi
    FROM gateway g
    CROSS JOIN replay_window w
    CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n
    WHERE n.node IS NOT NULL AND g.bootstrap_room IS NOT NULL AND g.ts IS NOT NULL
      AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
      AND g.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ) AND g.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
), orphans AS (  -- ... whose room the node's evidence never names
    -- a node whose log names rooms: vLLM's request lines name none (docs/vllm-lines.md), so a vLLM
    -- node's silence between them says nothing of a room's lines being lost
    SELECT 'engine_log' AS source, r.* FROM routed r
    WHERE r.node IN (SELECT DISTINCT node FROM engine_requests WHERE room IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM engine_requests e WHERE e.node = r.node AND e.room = r.room)
    UNION ALL
    SELECT DISTINCT 'pages', r.* FROM routed r JOIN node_missing m USING (node, file_id, row)
), reach AS (  -- how far the node's evidence of the rooms it does name lies outside their spans (its clock's
               -- offset from the gateway's, a format's idea of a request's time): a missing room's span
               -- is widened by as much
    SELECT 'engine_log' AS source, r.node,
           to_microseconds(greatest(0, max(epoch_us(e.ts) - epoch_us(r.hi)))) AS after_hi,
           to_microseconds(greatest(0, max(epoch_us(r.lo) - epoch_us(e.ts)))) AS before_lo
    FROM routed r JOIN engine_requests e ON e.node = r.node AND e.room = r.room
    WHERE r.node IN (SELECT node FROM orphans WHERE source = 'engine_log')
    GROUP BY r.node
    UNION ALL
    SELECT 'pages', r.node, to_microseconds(greatest(0, max(epoch_us(p.ts) - epoch_us(r.hi)))),
           to_microseconds(greatest(0, max(epoch_us(r.lo) - epoch_us(p.ts))))
    FROM routed r JOIN page_events p ON p.node = r.node AND p.room = r.room
    WHERE r.node IN (SELECT node FROM orphans WHERE source = 'pages')
    GROUP BY r.node
), missing AS (
    SELECT o.* REPLACE (o.lo - coalesce(x.before_lo, INTERVAL 0 SECOND) AS lo,
                        o.hi + coalesce(x.after_hi, INTERVAL 0 SECOND) AS hi)
    FROM orphans o LEFT JOIN reach x USING (source, node)
), evidence AS (  -- the seconds in which each node logged anything, per evidence
    SELECT DISTINCT 'engine_log' AS source, node, date_trunc('second', ts) AS t FROM engine_requests
    WHERE ts IS NOT NULL AND node IN (SELECT node FROM orphans WHERE source = 'engine_log')
    UNION ALL
    SELECT DISTINCT 'pages', node, date_trunc('second', ts) FROM page_events
    WHERE ts IS NOT NULL AND node IN (SELECT node FROM orphans WHERE source = 'pages')
), placed AS (  -- each missing request between the node's last second of evidence up to its span's end and
                -- the first from its span's start
    SELECT o.*, b.t AS before_t, (SELECT min(a.t) FROM evidence a WHERE a.source = o.source AND a.node = o.node
                                                                    AND a.t >= date_trunc('second', o.lo)) AS after_t
    FROM missing o ASOF LEFT JOIN evidence b ON b.source = o.source AND b.node = o.node AND b.t <= o.hi
), gaps AS (  -- a seed: nothing of the node in its whole span
    SELECT source, node, before_t AS gap_start, after_t + INTERVAL 1 SECOND AS gap_end, min(lo) AS seed_lo,
           max(hi) AS seed_hi
    FROM placed
    WHERE before_t IS NULL OR before_t + INTERVAL 1 SECOND <= lo
    GROUP BY ALL
), spans AS (
    SELECT gp.source, gp.node, coalesce(gp.gap_start, least(gp.seed_lo, min(o.lo))) AS gap_from,
           coalesce(gp.gap_end, greatest(gp.seed_hi, max(o.hi))) AS gap_to, count(DISTINCT o.request_id) AS requests_in_gap
    FROM gaps gp
    JOIN missing o ON o.source = gp.source AND o.node = gp.node
     AND o.hi >= coalesce(gp.gap_start, '-infinity'::TIMESTAMPTZ) AND o.lo <= coalesce(gp.gap_end, 'infinity'::TIMESTAMPTZ)
    GROUP BY gp.source, gp.node, gp.gap_start, gp.gap_end, gp.seed_lo, gp.seed_hi
)
SELECT s.node, s.source, s.gap_from, s.gap_to, s.requests_in_gap,
       CASE s.source WHEN 'engine_log' THEN (SELECT count(*) FROM engine_requests e WHERE e.node <> s.node AND e.ts >= s.gap_from AND e.ts < s.gap_to)
                     ELSE (SELECT count(*) FROM page_events p WHERE p.node <> s.node AND p.ts >= s.gap_from AND p.ts < s.gap_to) END
           AS other_lines,
       'the gateway routed ' || s.requests_in_gap || ' served request(s) to ' || s.node || ' between '
       || strftime(s.gap_from, '%Y-%m-%dT%H:%M:%SZ') || ' and ' || strftime(s.gap_to, '%Y-%m-%dT%H:%M:%SZ')
       || ' whose rooms its ' || CASE s.source WHEN 'engine_log' THEN 'engine log' ELSE 'page events' END
       || ' never name, and it logged nothing in that time' AS basis
FROM spans s;

-- Possible sources (spec section 7), the pool: who could have left KV on each decode node without page
-- telemetry that holds a signature response: the requests the gateway sent there and the rooms only its
-- log names, each with what its log bounds. The pairs are never stored: possible_sources (04) is a
-- view that joins this pool with the recipients' windows (02), and the accounts and bounds read the
-- pool's `reachable` flag (forensics.findings.possible_reach), so that their cost grows with the requests,
-- not with recipients x requests.
-- gone_at: the first server start-up on the node after the source's last line there; a start empties
-- the pool, so the source cannot be in the slots of a response that entered the scheduler at or after it.
-- Never for an aborted source, whose late transfer may land after its last line (gone_at empty).
-- reachable: whether it is a possible source of at least one response (set after the step).
-- Rooms whose decode lines a log outage of the node may have taken (a prefill node finished them, no
-- decode node's log names them: log_outages) are in the pool too (outage), their start unknown.
-- A node whose engine's lines no logs-only rule reads (unread_responses: vLLM's name no room) is
-- bounded by the gateway's own times only (clock 'gateway'), every request the gateway sent there (and
-- every one whose record names no decode node, where unread_responses says such a record may have):
-- started is when the gateway received it (it reached the node no earlier); gone_at a start-up of the
-- node proven after the source's end on the gateway clock (a success's ts + duration_ms, read to the
-- millisecond: $gw_slack_us) by the node's clock bounds against the gateway's (gateway_clock), as its
-- latest gateway time; none where no bound places the node's clock, and never for a source that did
-- not succeed (its transfer may land after the gateway's end). Clock 'node': the node's own lines.
-- Such a node's pool also holds every request sent to a prefill node its requests were prefilled on:
-- vLLM's decode pulls the prefill's blocks, and a stale reference (vLLM #52234) hands it blocks the
-- prefill gave another request, whose KV then stays in the decode's slots; no start-up of the decode
-- node ends such a source (its KV may arrive later), so it has no end (gone_at empty).
-- grain: node, room (or a gateway record without a room); reads: signature_responses, unread_responses,
--        dark_rooms, engine_lines, engine_requests, node_config, log_outages, gateway, gateway_clock,
--        request_cohort; params: gw_slack_us
CREATE OR REPLACE TABLE possible_pool AS
WITH unread AS (SELECT DISTINCT node FROM unread_responses),
unread_to AS (  -- each such node, and whether a record that names no decode node may have gone there
    SELECT node, bool_or(NOT node_named) AS any_record FROM unread_responses GROUP BY node
),
dark AS (SELECT DISTINCT node FROM signature_responses WHERE node NOT IN (SELECT node FROM unread)),
on_node AS (  -- per room, the node's own clock
    SELECT * FROM dark_rooms WHERE node IN (SELECT node FROM dark)
), starts AS (  -- server start-ups on the dark nodes
    SELECT node, ts FROM engine_lines WHERE kind IN ('server_args', 'startup') AND node IN (SELECT node FROM dark)
), sent AS (  -- the requests the gateway sent to a dark node
    SELECT DISTINCT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, g.decode_node AS node,
           g.bootstrap_room AS room
    FROM gateway g LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    WHERE g.decode_node IN (SELECT node FROM dark)
), reach AS (  -- how long the node runs a room: its longest, from its own lines
    SELECT node, coalesce(max(finished - coalesce(started, forward_start)), INTERVAL 1 MINUTE) AS longest
    FROM on_node GROUP BY node
), orphans AS (  -- rooms a prefill node finished that no decode node's log names and no gateway record
                 -- routes, at a time the dark node's log was out: their decode lines may be among those lost
    SELECT o.node, e.room,
           'prefilled on ' || min(e.node) || ' at ' || strftime(min(e.ts), '%Y-%m-%dT%H:%M:%S.%gZ')
           || '; no decode node''s log names the room, and ' || o.node || '''s log has an outage from '
           || strftime(min(o.gap_from), '%Y-%m-%dT%H:%M:%SZ') || ' to ' || strftime(max(o.gap_to), '%Y-%m-%dT%H:%M:%SZ')
           || ' (log_outages)' AS place
    FROM log_outages o
    LEFT JOIN reach x ON x.node = o.node
    JOIN engine_requests e ON e.ts <= o.gap_to AND e.ts >= o.gap_from - coalesce(x.longest, INTERVAL 1 MINUTE)
    WHERE o.source = 'engine_log' AND o.node IN (SELECT node FROM dark)
      AND e.kind IN ('time_stats', 'finished') AND e.room IS NOT NULL
      AND e.node IN (SELECT node FROM node_config WHERE role = 'prefill')
      AND e.room NOT IN (SELECT room FROM engine_requests
                         WHERE room IS NOT NULL AND node IN (SELECT node FROM node_config WHERE role = 'decode'))
      AND e.room NOT IN (SELECT bootstrap_room FROM gateway
                         WHERE bootstrap_room IS NOT NULL AND decode_node IS NOT NULL)
    GROUP BY o.node, e.room
), orphan_sources AS (  -- with the request a gateway record names by the room, where one does
    SELECT o.node, o.room, min(g.request_id) AS request_id, min(g.account_id) AS account_id,
           coalesce(min(c.cohort), 'customer') AS cohort, o.place
    FROM orphans o
    LEFT JOIN gateway g ON g.bootstrap_room = o.room
    LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    GROUP BY o.node, o.room, o.place
), sources AS (  -- every request with KV on a dark node: those the gateway sent, and rooms only its log names
    SELECT coalesce(s.node, o.node) AS node, coalesce(s.room, o.room) AS room, s.request_id, s.account_id,
           s.cohort, o.started, o.last_seen, coalesce(o.aborted, false) AS aborted, o.rid, o.place,
           false AS outage
    FROM sent s FULL JOIN on_node o ON o.node = s.node AND o.room = s.room
    UNION ALL
    -- an orphan's start is unknown: its prefill time is on another node's clock, and no page telemetry
    -- bounds the offset to the dark node's; its last line is lost, so no start-up is proven to have
    -- emptied it (gone_at empty)
    SELECT node, room, request_id, account_id, cohort, NULL, NULL, false, NULL, place, true
    FROM orphan_sources
    WHERE (node, room) NOT IN (SELECT (node, room) FROM sent WHERE room IS NOT NULL)
), unread_starts AS (  -- start-ups on those nodes as [earliest, latest] gateway times, by the node's clock bounds
    SELECT t.node, t.ts - to_microseconds(k.hi_us) AS earliest, t.ts - to_microseconds(k.lo_us) AS latest
    FROM engine_lines t JOIN gateway_clock k ON k.node = t.node AND k.consistent
    WHERE t.kind IN ('server_args', 'startup') AND t.node IN (SELECT node FROM unread)
), feeds AS (  -- the prefill nodes each such node's requests were prefilled on
    SELECT DISTINCT decode_node AS node, prefill_node FROM gateway
    WHERE decode_node IN (SELECT node FROM unread) AND prefill_node IS NOT NULL
), unread_gw AS (  -- every record the gateway sent to such a node (direct), every record that names no decode
                   -- node where unread_responses says one may have gone there (direct), and every record sent
                   -- to a prefill node it pulled from (not direct: no end, its KV may arrive later)
    SELECT g.decode_node AS node, true AS direct, g.* FROM gateway g WHERE g.decode_node IN (SELECT node FROM unread)
    UNION ALL
    SELECT u.node, true, g.* FROM gateway g JOIN unread_to u ON u.any_record WHERE g.decode_node IS NULL
    UNION ALL
    SELECT f.node, false, g.* FROM gateway g JOIN feeds f ON f.prefill_node = g.prefill_node
    WHERE g.decode_node IS DISTINCT FROM f.node
      AND NOT (g.decode_node IS NULL AND f.node IN (SELECT node FROM unread_to WHERE any_record))
), unread_sent AS (  -- ... per request, on the gateway's clock
    SELECT g.node, g.bootstrap_room AS room, g.request_id, min(g.account_id) AS account_id,
           coalesce(min(c.cohort), 'customer') AS cohort, min(g.ts) AS started,
           -- its end, where the gateway logged a success with its duration (each record of the id)
           CASE WHEN bool_and(g.direct AND g.status BETWEEN 200 AND 299 AND g.duration_ms IS NOT NULL
                              AND g.ts IS NOT NULL)
                THEN max(g.ts + to_microseconds((round(g.duration_ms * 1000) + 2 * $gw_slack_us)::BIGINT)) END AS ended
    FROM unread_gw g LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    GROUP BY g.node, g.bootstrap_room, g.request_id
)
SELECT s.*, 'node' AS clock,
       CASE WHEN NOT s.aborted THEN (SELECT min(t.ts) FROM starts t WHERE t.node = s.node AND t.ts > s.last_seen) END
           AS gone_at,
       NULL::BOOLEAN AS reachable  -- set by forensics.findings.possible.possible_reach
FROM sources s
UNION ALL
SELECT u.node, u.room, u.request_id, u.account_id, u.cohort, u.started, u.ended AS last_seen, false,
       NULL, NULL, false, 'gateway',
       (SELECT min(t.latest) FROM unread_starts t WHERE t.node = u.node AND t.earliest > u.ended), NULL
FROM unread_sent u;

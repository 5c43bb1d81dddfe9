-- tier_cases: the responses on the decode nodes with page telemetry that an indeterminate tier's
-- logs-only rule flags, each with what its page events say (pages: confirmed, indeterminate, or clean:
-- no page evidence of exposure); tier_reliability counts those `counted`. The rules, applied as on the
-- nodes without page telemetry:
-- - late_write: the rooms late_write_rule flags, delivered, other than the placeholder responses
--   (those are the signature tier's, as on the nodes without page telemetry);
-- - signature: the rooms whose engine logs show the placeholder signature (a prefill line of the
--   room's placeholder: over-length, or input length 1; the decode node ran the room with an input
--   above 1), delivered; counted where the allocator model's replays from the logs do not all show
--   its pages written over (calibration_rooms: signature_status's check, which leaves such a
--   signature indeterminate). Only the calibration nodes are replayed: the others count nothing here.
-- grain: tier, request_id, node; reads: late_write_rule, calibration_rooms, affected_responses,
--        engine_requests, node_config, telemetry_nodes, gateway, replay_window; params: none
CREATE OR REPLACE TABLE tier_cases AS
WITH lit AS (  -- the decode nodes with page telemetry: where page events settle what the logs suspect
    SELECT node FROM telemetry_nodes WHERE node IN (SELECT node FROM node_config WHERE role = 'decode')
), delivered AS (
    SELECT request_id, decode_node AS node, bootstrap_room AS room FROM gateway
    WHERE decode_node IN (SELECT node FROM lit) AND bootstrap_room IS NOT NULL
      AND (status BETWEEN 200 AND 299 OR coalesce(completion_tokens, 0) > 0)
      AND ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
      AND ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
), placeholder AS (  -- rooms a prefill node replaced with a one-token placeholder, by its lines
    SELECT DISTINCT room FROM engine_requests
    WHERE room IS NOT NULL AND node IN (SELECT node FROM node_config WHERE role = 'prefill')
      AND (kind = 'overlength' OR (kind IN ('time_stats', 'finished') AND input_len = 1
                                   AND coalesce(detail, 'prefill') NOT LIKE '%decode%'))
), full_input AS (  -- rooms a decode node with page telemetry ran with an input above one token
    SELECT DISTINCT node, room FROM engine_requests
    WHERE node IN (SELECT node FROM lit) AND kind IN ('time_stats', 'finished') AND input_len > 1
), signature AS (  -- every placeholder signature there: the late-write tier leaves these out
    SELECT DISTINCT d.request_id, d.node, d.room FROM delivered d
    JOIN full_input f USING (node, room) SEMI JOIN placeholder p ON p.room = d.room
), late AS (
    SELECT DISTINCT d.request_id FROM delivered d
    SEMI JOIN late_write_rule r ON r.node = d.node AND r.room = d.room
    WHERE d.request_id NOT IN (SELECT request_id FROM signature)
), flagged AS (
    SELECT 'late_write' AS tier, request_id, true AS counted FROM late
    UNION ALL
    SELECT 'signature', s.request_id, coalesce(m.written_members < m.members, false)
    FROM signature s LEFT JOIN calibration_rooms m ON m.node = s.node AND m.room = s.room
), verdict AS (  -- what the page events say of each flagged response
    SELECT f.tier, f.request_id, d.node, f.counted, coalesce(a.status, 'clean') AS pages
    FROM flagged f
    JOIN (SELECT DISTINCT request_id, node FROM delivered) d USING (request_id)
    LEFT JOIN (SELECT * FROM affected_responses WHERE evidence = 'pages') a USING (request_id)
)
SELECT DISTINCT tier, request_id, node, counted, pages FROM verdict ORDER BY tier, request_id, node;

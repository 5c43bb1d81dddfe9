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
-- grain: node, room (or a gateway record without a room); reads: signature_responses, dark_rooms,
--        engine_lines, gateway, request_cohort; params: none
CREATE OR REPLACE TABLE possible_pool AS
WITH dark AS (SELECT DISTINCT node FROM signature_responses),
on_node AS (  -- per room, the node's own clock
    SELECT * FROM dark_rooms WHERE node IN (SELECT node FROM dark)
), starts AS (  -- server start-ups on the dark nodes
    SELECT node, ts FROM engine_lines WHERE kind IN ('server_args', 'startup') AND node IN (SELECT node FROM dark)
), sent AS (  -- the requests the gateway sent to a dark node
    SELECT DISTINCT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, g.decode_node AS node,
           g.bootstrap_room AS room
    FROM gateway g LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    WHERE g.decode_node IN (SELECT node FROM dark)
), sources AS (  -- every request with KV on a dark node: those the gateway sent, and rooms only its log names
    SELECT coalesce(s.node, o.node) AS node, coalesce(s.room, o.room) AS room, s.request_id, s.account_id,
           s.cohort, o.started, o.last_seen, coalesce(o.aborted, false) AS aborted, o.rid, o.place
    FROM sent s FULL JOIN on_node o ON o.node = s.node AND o.room = s.room
)
SELECT s.*,
       CASE WHEN NOT s.aborted THEN (SELECT min(t.ts) FROM starts t WHERE t.node = s.node AND t.ts > s.last_seen) END
           AS gone_at,
       NULL::BOOLEAN AS reachable  -- set by forensics.findings.possible.possible_reach
FROM sources s;

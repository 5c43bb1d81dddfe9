-- Which client request a (node, room) belongs to: bootstrap_room joins the gateway to both engines.
-- When the gateway names the nodes, the node must be one of them. Only the rooms the findings name
-- (replayed rooms, readers, writers and holders of what they found, exposure sources and recipients,
-- indeterminate rooms) are mapped, on every node they appear on: nothing else looks a room up.
-- grain: node, room, gateway record (two records of one request_id give two rows: consumers that add
--        slots up join the distinct mapping columns they need); reads: gateway, request_cohort,
--        node_own_rooms (ownership's scratch: its last reader), page_events, transfer_landing, room_state,
--        read_provenance, write_effects, room_flags, pull_sightings; params: none
-- The rooms of a node are those its page events name (its own events, noted by the ownership stage in
-- node_own_rooms, and the transfers it sent), the transfers that landed in it (transfer_landing), and the
-- transfers a sender's page events name it the receiver of (peer): the rooms of its timeline, its sends,
-- and its receives where it has no page events of its own (transfer_landing places landings on receivers
-- with telemetry only), so an exposure the sender's events show on such a receiver (pull_sightings) is
-- its record's, not a row of a room no record names.
CREATE OR REPLACE TABLE room_requests AS
WITH named AS (
    -- exposure_segments' rooms are among these: its rows are read_provenance's (room, w_room),
    -- write_effects' (attending_room = holder, room) and pull_sightings' (recipient_room, source_room)
    SELECT room FROM room_state UNION SELECT room FROM read_provenance
    UNION SELECT w_room FROM read_provenance UNION SELECT room FROM write_effects
    UNION SELECT holder FROM write_effects UNION SELECT room FROM room_flags
    UNION SELECT recipient_room FROM pull_sightings UNION SELECT source_room FROM pull_sightings
), rooms AS (
    SELECT node, room FROM node_own_rooms WHERE room IN (SELECT room FROM named)
    UNION SELECT node, room FROM page_events WHERE op = 'transfer' AND room IN (SELECT room FROM named)
    UNION SELECT peer, room FROM page_events
          WHERE op = 'transfer' AND peer IS NOT NULL AND room IN (SELECT room FROM named)
    UNION SELECT receiver, room FROM transfer_landing WHERE room IN (SELECT room FROM named)
), requests AS MATERIALIZED (  -- the gateway rows of those rooms, before their cohort lookup
    SELECT * FROM gateway WHERE bootstrap_room IN (SELECT room FROM rooms)
)
SELECT r.node, r.room, g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort,
       coalesce(c.cohort_kind, 'customer') AS cohort_kind, g.status AS http_status, g.completion_tokens, g.ts
FROM rooms r
JOIN requests g ON g.bootstrap_room = r.room
  AND (r.node IN (g.decode_node, g.prefill_node) OR (g.decode_node IS NULL AND g.prefill_node IS NULL))
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row;

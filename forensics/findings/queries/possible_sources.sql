-- Possible sources (spec section 7) of every response without page evidence (signature_responses):
-- every request whose KV could have been in the slots it attended. That is KV written on its decode
-- node (a request decoded there, sent there by the gateway, or aborted there with a transfer that may
-- land late) and not provably gone before the response allocated. A superset by construction: a pair
-- is left out only when the node's own clock proves it impossible:
--   - the source entered the node's scheduler (its Req Time Stats start_time) after the response's
--     decode finished (its Req Time Stats line), so nothing of it was in the pool while the response
--     attended it;
--   - a server start-up on the node (a server_args, Init torch distributed or Load weight begin line)
--     lies after the source's last line there and
--     no later than the response's start_time: a start empties the pool. Never for an aborted source,
--     whose late transfer may land after its last line.
-- The pool's capacity proves nothing gone (a freed page can stay unreused for days), so it is not used.
-- likelihood: the allocator model's (forensics.findings.likelihood) calibrated rate for the number of its
-- replays that found the pair, where the model replayed both rooms and page evidence calibrated it, at
-- least 0.001 (a possible pair is never ruled out by a model); else empty (unknown, never 0).
-- model_replays: how many of the model's replays found the pair (0 where it replayed both rooms and none
-- did; empty where it did not replay them): without calibration it ranks nothing.
-- A response a late transfer may have written into (late_write_responses) and no placeholder: only the
-- aborted rooms whose transfers may have landed while it held pages (its own transfer filled its pages
-- before it read them).
-- grain: recipient request, source request (or engine rid without a gateway record), node;
-- reads: signature_responses, late_write_responses, dark_rooms, gateway, engine_lines, request_cohort,
--        source_likelihood, likelihood_map, model_rooms; params: none
CREATE OR REPLACE TABLE possible_sources AS
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
), recipients AS (
    SELECT r.request_id, r.account_id, r.cohort, r.node, r.room, o.started, o.finished
    FROM signature_responses r LEFT JOIN on_node o ON o.node = r.node AND o.room = r.room
), pairs AS (  -- the pairs; their likelihood is looked up once, below
SELECT r.request_id AS recipient_request_id, coalesce(s.request_id, '') AS source_request_id,
       r.account_id AS recipient_account_id, s.account_id AS source_account_id, r.node,
       CASE WHEN s.aborted THEN 'aborted on ' || r.node || ' (' || s.place || '): its transfer may have landed late'
            WHEN s.started IS NOT NULL THEN 'decoded on ' || r.node || ' (' || s.place || '), entered its scheduler at '
                 || strftime(s.started, '%Y-%m-%dT%H:%M:%S.%gZ') || ' on the node''s clock, '
                 || CASE WHEN r.finished IS NULL THEN 'the response''s decode end is not logged'
                         ELSE 'before the response''s decode ended (' || strftime(r.finished, '%Y-%m-%dT%H:%M:%S.%gZ') || ')' END
            WHEN s.place IS NOT NULL THEN 'logged on ' || r.node || ' (' || s.place || ') without a start time'
            ELSE 'sent to ' || r.node || ' by the gateway; no line of its log names the room: its KV may have been written at any time'
       END || CASE WHEN s.request_id IS NULL THEN '; no gateway record (engine rid ' || coalesce(s.rid, '?') || ')' ELSE '' END
           || '; no start-up of ' || r.node || ' in between' AS basis,
       r.cohort AS recipient_cohort, s.cohort AS source_cohort, r.room AS recipient_room, s.room AS source_room
FROM recipients r JOIN sources s ON s.node = r.node AND s.room IS DISTINCT FROM r.room
WHERE s.request_id IS DISTINCT FROM r.request_id
  AND NOT coalesce(s.started > r.finished, false)
  AND NOT (NOT s.aborted AND EXISTS (SELECT 1 FROM starts t WHERE t.node = r.node AND t.ts > s.last_seen
                                                              AND t.ts <= r.started))
UNION ALL
SELECT w.request_id, coalesce(w.source_request_id, ''), w.account_id, w.source_account_id, w.node, w.why,
       w.cohort, w.source_cohort, w.room, w.source_room
FROM late_write_responses w
WHERE w.request_id NOT IN (SELECT request_id FROM signature_responses)
)
SELECT p.recipient_request_id, p.source_request_id, p.recipient_account_id, p.source_account_id, p.node, p.basis,
       CASE WHEN mr.room IS NOT NULL AND ms.room IS NOT NULL AND m.likelihood IS NOT NULL
            THEN round(greatest(m.likelihood, 0.001), 3) END AS likelihood,
       CASE WHEN mr.room IS NOT NULL AND ms.room IS NOT NULL THEN coalesce(l.hits, 0) END AS model_replays,
       p.recipient_cohort, p.source_cohort, p.recipient_room, p.source_room
FROM pairs p
LEFT JOIN source_likelihood l ON l.node = p.node AND l.recipient_room = p.recipient_room AND l.source_room = p.source_room
LEFT JOIN likelihood_map m ON m.node = p.node AND m.hits = coalesce(l.hits, 0)
LEFT JOIN model_rooms mr ON mr.node = p.node AND mr.room = p.recipient_room
LEFT JOIN model_rooms ms ON ms.node = p.node AND ms.room = p.source_room;

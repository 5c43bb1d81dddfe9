-- Possible sources, the pairs that are not a window's, stored as pairs:
--   - the late-write pairs (few: one per aborted room whose transfer may have landed while a response
--     held pages): a response a late transfer may have written into (late_write_responses) that is no
--     placeholder, with only those aborted rooms (its own transfer filled its pages before it read them);
--   - the seq-gap pairs, on nodes with page telemetry: each indeterminate response (affected_responses)
--     whose room on the node is flagged (room_flags) or has no page events there (missing_rooms), with
--     every source of each lost gap before its last event (gap_sources: the gap's holders and the rooms in
--     flight across it), but those the page events already pair with it (exposures). A response without
--     a gateway record keeps its key (the rid) and its room; a source without one, its room;
--   - the sender pairs, on receivers whose senders lost page events or kept none: each indeterminate
--     affected response (a confirmed one too) with every room whose unlogged transfer may hold what it
--     read (sender_sources), but
--     those the page events already pair with it (exposures);
--   - the unlanded pairs: each affected response with page evidence that read slots a send which never
--     landed in the files may have written (unlanded_readers), with the send's room.
-- grain: recipient request, source request (or room), node; reads: late_write_responses, signature_responses,
--        affected_responses, room_requests, missing_rooms, room_flags, gap_sources, sender_sources, page_events,
--        seq_gaps, exposures, gateway, request_cohort, unlanded_sends,
--        unlanded_readers; params: none
-- scratch: unlanded_readers (read by room_flags too, which runs before)
CREATE OR REPLACE TABLE possible_extra AS
WITH indeterminate AS (
    SELECT request_id, account_id, cohort, decode_node, room FROM affected_responses
    WHERE status = 'indeterminate' AND evidence = 'pages'
), recipient AS (  -- (node, room) of each: its gateway record's rooms, its missing room, else its own
    SELECT DISTINCT r.node, r.room, a.request_id, a.account_id, a.cohort FROM indeterminate a
    JOIN (SELECT node, room, request_id FROM room_requests UNION SELECT node, room, request_id FROM missing_rooms) r
      USING (request_id)
    UNION
    SELECT decode_node, room, request_id, account_id, cohort FROM indeterminate
    WHERE request_id NOT IN (SELECT request_id FROM gateway WHERE request_id IS NOT NULL)
), affected AS (  -- every affected response with page evidence, confirmed or not, by (node, room)
    SELECT DISTINCT r.node, r.room, a.request_id, a.account_id, a.cohort FROM affected_responses a
    JOIN (SELECT node, room, request_id FROM room_requests UNION SELECT node, room, request_id FROM missing_rooms) r
      USING (request_id)
    WHERE a.evidence = 'pages'
    UNION
    SELECT decode_node, room, request_id, account_id, cohort FROM affected_responses
    WHERE evidence = 'pages' AND request_id NOT IN (SELECT request_id FROM gateway WHERE request_id IS NOT NULL)
), last_event AS (
    SELECT node, room, max(seq) AS last_seq FROM page_events
    WHERE node IN (SELECT node FROM gap_sources) GROUP BY node, room
), exposed AS (  -- flagged on the node, or without page events there (all of them lost)
    SELECT r.*, e.last_seq FROM recipient r LEFT JOIN last_event e USING (node, room)
    WHERE (r.node, r.room) IN (SELECT (node, room) FROM room_flags)
       OR (r.node, r.room) IN (SELECT (node, room) FROM missing_rooms)
), requests AS (  -- the sources' requests, where a gateway record names the room: room_requests maps only
                  -- the rooms the replay names (a screened replay names fewer), so the gap's, the
                  -- senders' and the unlanded sends' rooms are looked up in the gateway as room_requests does
    SELECT node, room, request_id, account_id, cohort FROM room_requests
    UNION SELECT node, room, request_id, account_id, cohort FROM missing_rooms
    UNION SELECT s.node, s.room, g.request_id, g.account_id, coalesce(c.cohort, 'customer')
    FROM (SELECT node, room FROM gap_sources UNION SELECT node, source_room FROM sender_sources
          UNION SELECT receiver, room FROM unlanded_sends) s
    JOIN gateway g ON g.bootstrap_room = s.room
     AND (s.node IN (g.decode_node, g.prefill_node) OR (g.decode_node IS NULL AND g.prefill_node IS NULL))
    LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
), gap_rows AS (
    SELECT x.request_id, x.account_id, x.cohort, x.node, x.room, q.request_id AS source_request_id,
           q.account_id AS source_account_id, q.cohort AS source_cohort, s.room AS source_room,
           'seq gap on ' || x.node || ' (' || g.missing || ' events lost after seq ' || g.prev_seq || '): '
           || CASE WHEN s.holder AND s.in_flight THEN 'its KV was the last write of some slot when the gap began, '
                   || 'and its events may be among those lost'
                   WHEN s.holder THEN 'its KV was the last write of some slot when the gap began'
                   ELSE 'its events may be among those lost' END
           || CASE WHEN q.request_id IS NULL THEN '; no gateway record names room ' || s.room ELSE '' END AS why
    FROM exposed x
    JOIN seq_gaps g ON g.node = x.node AND g.kind = 'lost' AND (x.last_seq IS NULL OR x.last_seq > g.prev_seq)
    JOIN gap_sources s ON s.node = g.node AND s.gap_seq = g.prev_seq AND s.room IS DISTINCT FROM x.room
    LEFT JOIN requests q ON q.node = s.node AND q.room = s.room
    WHERE q.request_id IS DISTINCT FROM x.request_id
      AND NOT EXISTS (SELECT 1 FROM exposures e WHERE e.node = x.node AND e.recipient_room = x.room
                      AND e.source_room = s.room)
), gap_pairs AS (
    SELECT x.request_id AS recipient_request_id, coalesce(x.source_request_id, '') AS source_request_id,
           x.account_id AS recipient_account_id, x.source_account_id, x.node,
           string_agg(DISTINCT why, '; ' ORDER BY why) AS basis,
           x.cohort AS recipient_cohort, x.source_cohort, x.room AS recipient_room, x.source_room
    FROM gap_rows x
    GROUP BY ALL
), sender_pairs AS (
    SELECT x.request_id AS recipient_request_id, coalesce(q.request_id, '') AS source_request_id,
           x.account_id AS recipient_account_id, q.account_id AS source_account_id, x.node,
           'a sending node lost page events or kept none: its transfer, logged nowhere, may have landed in '
           || 'slots the response read after their last write the evidence proves'
           || CASE WHEN q.request_id IS NULL THEN '; no gateway record names room ' || s.source_room ELSE '' END
           AS basis,
           x.cohort AS recipient_cohort, q.cohort AS source_cohort, x.room AS recipient_room, s.source_room
    FROM affected x
    JOIN sender_sources s ON s.node = x.node AND s.recipient_room = x.room
    LEFT JOIN requests q ON q.node = s.node AND q.room = s.source_room
    WHERE q.request_id IS DISTINCT FROM x.request_id
      AND NOT EXISTS (SELECT 1 FROM exposures e WHERE e.node = x.node AND e.recipient_room = x.room
                      AND e.source_room = s.source_room)
      AND NOT EXISTS (SELECT 1 FROM gap_pairs g WHERE g.node = x.node AND g.recipient_room = x.room
                      AND g.source_room = s.source_room AND g.recipient_request_id IS NOT DISTINCT FROM x.request_id)
)
, unlanded_pairs AS (  -- the rooms of sends that never landed in the files, with each affected reader of
                       -- their slots after the room took them (unlanded_sends: they may have landed there)
    SELECT DISTINCT x.request_id AS recipient_request_id, coalesce(q.request_id, '') AS source_request_id,
           x.account_id AS recipient_account_id, q.account_id AS source_account_id, x.node,
           'a transfer from ' || u.sender || ' into [' || u.start || ',' || u."end" || ') '
           || CASE WHEN u.failed THEN 'ended Failed after it was sent' ELSE 'was sent and never logged as landed' END
           || ': it may have landed in the slots the response read'
           || CASE WHEN q.request_id IS NULL THEN '; no gateway record names room ' || u.send_room ELSE '' END AS basis,
           x.cohort AS recipient_cohort, q.cohort AS source_cohort, x.room AS recipient_room, u.send_room AS source_room
    FROM affected x
    JOIN unlanded_readers u ON u.node = x.node AND u.room = x.room
    LEFT JOIN requests q ON q.node = x.node AND q.room = u.send_room
    WHERE q.request_id IS DISTINCT FROM x.request_id
      AND NOT EXISTS (SELECT 1 FROM exposures e WHERE e.node = x.node AND e.recipient_room = x.room
                      AND e.source_room = u.send_room)
)
SELECT w.request_id AS recipient_request_id, coalesce(w.source_request_id, '') AS source_request_id,
       w.account_id AS recipient_account_id, w.source_account_id, w.node, w.why AS basis,
       w.cohort AS recipient_cohort, w.source_cohort, w.room AS recipient_room, w.source_room
FROM late_write_responses w
WHERE w.request_id NOT IN (SELECT request_id FROM signature_responses)
UNION ALL
SELECT * FROM gap_pairs
UNION ALL
SELECT * FROM sender_pairs
UNION ALL
SELECT * FROM unlanded_pairs;

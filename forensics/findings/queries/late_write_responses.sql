-- Responses on a decode node without page telemetry that a late transfer may have written into (the
-- second leak path): the rooms late_write_rule flags there, delivered. Which pages a late transfer hit
-- the logs cannot say, so such a response is indeterminate and the aborted room one of its possible
-- sources.
-- grain: recipient request, aborted room; reads: late_write_rule, dark_rooms, gateway, request_cohort,
--        telemetry_nodes, replay_window; params: none
CREATE OR REPLACE TABLE late_write_responses AS
WITH hit AS (
    SELECT node, room, source_room, isinf(hi) AS open_ended,
           strftime(make_timestamp((lo * 1e6)::BIGINT), '%Y-%m-%dT%H:%M:%S.%gZ') AS lo_text,
           strftime(make_timestamp((least(hi, 1e11) * 1e6)::BIGINT), '%Y-%m-%dT%H:%M:%S.%gZ') AS hi_text,
           make_timestamp((lo * 1e6)::BIGINT) AS lo_ts
    FROM late_write_rule WHERE node NOT IN (SELECT node FROM telemetry_nodes)
), senders AS (  -- the aborted rooms' gateway records on that node
    SELECT DISTINCT g.decode_node AS node, g.bootstrap_room AS room, g.request_id, g.account_id,
           coalesce(c.cohort, 'customer') AS cohort
    FROM gateway g LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    WHERE g.bootstrap_room IN (SELECT source_room FROM hit)
)
SELECT DISTINCT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, h.node, g.prefill_node, h.room,
       g.status AS http_status, g.completion_tokens, g.ts, h.source_room, s.request_id AS source_request_id,
       s.account_id AS source_account_id, s.cohort AS source_cohort, h.lo_ts AS first_exposed_at,
       'aborted on ' || h.node || ' (' || coalesce(d.place, 'room ' || h.source_room) || '): its transfer may have landed '
           || CASE WHEN h.open_ended THEN 'after ' || h.lo_text ELSE 'between ' || h.lo_text || ' and ' || h.hi_text END
           || ' on the node''s clock, while this response held pages there' AS why
FROM hit h
JOIN gateway g ON g.decode_node = h.node AND g.bootstrap_room = h.room
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
LEFT JOIN dark_rooms d ON d.node = h.node AND d.room = h.source_room
LEFT JOIN senders s ON s.node = h.node AND s.room = h.source_room
WHERE (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
  AND g.ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
  AND g.ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ);

-- The placeholder signature on decode nodes without page telemetry (spec section 7): prefill replaced
-- the prompt with one token (its over-length line, or input len 1 for that room), decode ran the same
-- room with the full input length, and the response was delivered (HTTP 2xx, completion tokens > 0).
-- Complete, it proves the response was decoded over KV slots its own request never wrote: `confirmed`.
-- With a part missing or contradicted it is `indeterminate`, and `reason` names what is missing. Every
-- piece of evidence is named by its file (relative to the bundle) and line. Whose data those slots held
-- the logs cannot say (possible_sources.sql bounds it).
-- Where no prefill line names the room (a prefill log without request lines, say) but the gateway's
-- prompt length lies in the leak window of its prefill/decode pair (forensics.engines.sglang), the
-- response is `indeterminate`: such a prompt is replaced by a placeholder, and nothing in the evidence
-- clears it; the reason says the prefill line is missing.
-- Delivery: the gateway's HTTP 2xx and its completion tokens; a gateway format without token counts
-- (SMG) leaves the decode node's own output length as the count (the reason names the line).
-- first_exposed_at: the start of decode's forward pass on the decode node's clock (its Req Time Stats
-- line's time minus forward_duration); without one, the gateway's receive time (earlier than any
-- exposure, so never late).
-- A signature the engine logs hold whole (a prefill line of the room's placeholder, decode's run of the
-- same room with the full input length) whose room no gateway record names (the record lost, rejected,
-- or in a skipped file) is kept, never dropped: its account empty (unknown), its cohort customer (the
-- safe side: no exclusion rule can clear what it cannot see), its request id the rid its decode node
-- logged (else "room:<room>"), as affected_responses keys a page-evidence response without a record.
-- Delivery is then not shown (no HTTP status): `indeterminate`, and the reason says the record is missing.
-- Its time is the decode's forward start (else its scheduler start, else its last line).
-- A placeholder no decode node's log names, made while a decode node without page telemetry had a log
-- outage (log_outages: within that node's longest decode run before it), is kept too: its decode may be
-- among the lines lost. Keyed by its gateway record if one names the room, else "room:<room>"; on each
-- such node; `indeterminate` (delivery not shown), the reason naming the outage.
-- grain: request_id (or the decode node's rid), node; reads: gateway, engine_requests, files, dark_rooms,
--        telemetry_nodes, request_cohort, replay_window, node_limits, log_outages; params: none
CREATE OR REPLACE TABLE signature_responses AS
WITH prefill_rooms AS (  -- rid -> room on the prefill node, then the over-length rid to its room
    SELECT node, rid, any_value(room) AS room FROM engine_requests
    WHERE room IS NOT NULL AND kind IN ('time_stats', 'finished') GROUP BY node, rid
), placeholder AS (  -- "engine/prefill-0/server.log line 6" names each line
    SELECT e.node, coalesce(e.room, pr.room) AS room, e.ts,
           CASE WHEN e.kind = 'overlength' THEN 'prefill logged "Input length (' || e.input_len || ' tokens) exceeds the maximum allowed length (' || e.max_input_len || ' tokens)" (' || f.path || ' line ' || e.line || ')'
                ELSE 'prefill ran the request with input length 1 (' || f.path || ' line ' || e.line || ')' END AS why
    FROM engine_requests e JOIN files f USING (file_id)
    LEFT JOIN prefill_rooms pr ON pr.node = e.node AND pr.rid = e.rid
    WHERE e.kind = 'overlength' OR (e.kind IN ('time_stats', 'finished') AND e.input_len = 1
                                    AND coalesce(e.detail, 'prefill') NOT LIKE '%decode%')
), matched AS (
    SELECT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, g.decode_node AS node,
           g.prefill_node AS logged_prefill, min(p.node) AS placeholder_node, g.bootstrap_room AS room,
           g.status AS http_status, g.completion_tokens, g.ts, d.decode_input, d.forward_start, d.decode_why,
           d.decode_output, d.output_place,
           g.prompt_tokens, string_agg(DISTINCT p.why, '; ' ORDER BY p.why) AS prefill_why
    FROM gateway g
    JOIN placeholder p ON p.room = g.bootstrap_room AND (g.prefill_node IS NULL OR p.node = g.prefill_node)
    LEFT JOIN dark_rooms d ON d.node = g.decode_node AND d.room = g.bootstrap_room
    LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    WHERE g.decode_node IS NOT NULL AND g.decode_node NOT IN (SELECT node FROM telemetry_nodes)
      AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
      AND coalesce(d.decode_input, g.prompt_tokens, 0) > 1
      -- a replay window (--since/--until) scopes the requests received inside it
      AND g.ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
      AND g.ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
    GROUP BY ALL
), by_window AS (  -- no prefill line names the room, but the gateway's prompt lies in the pair's leak window
    SELECT g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, g.decode_node AS node,
           g.prefill_node AS logged_prefill, NULL AS placeholder_node, g.bootstrap_room AS room,
           g.status AS http_status, g.completion_tokens, g.ts, d.decode_input, d.forward_start, d.decode_why,
           d.decode_output, d.output_place,
           g.prompt_tokens,
           'the gateway logged a prompt of ' || g.prompt_tokens || ' tokens, inside the leak window [' || p.max_in
           || ', ' || dl.max_in || ') of ' || g.prefill_node || ' -> ' || g.decode_node
           || ', which prefill replaces with a 1-token placeholder; missing: no line of ' || g.prefill_node
           || ' (over-length, or input length 1) names room ' || g.bootstrap_room AS prefill_why
    FROM gateway g
    JOIN node_limits p ON p.node = g.prefill_node
    JOIN node_limits dl ON dl.node = g.decode_node
    LEFT JOIN dark_rooms d ON d.node = g.decode_node AND d.room = g.bootstrap_room
    LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    WHERE g.decode_node NOT IN (SELECT node FROM telemetry_nodes) AND g.bootstrap_room IS NOT NULL
      AND in_leak_window(g.prompt_tokens, p.max_in, dl.max_in)
      AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
      AND g.request_id NOT IN (SELECT request_id FROM matched)
      AND g.ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
      AND g.ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
), unnamed AS (  -- the whole signature in the engine logs, no gateway record of the room
    SELECT coalesce(nullif(d.rid, ''), 'room:' || d.room) AS request_id, NULL::VARCHAR AS account_id,
           'customer' AS cohort, d.node, NULL AS logged_prefill, min(p.node) AS placeholder_node, d.room,
           NULL::INTEGER AS http_status, NULL::INTEGER AS completion_tokens,
           coalesce(d.forward_start, d.started, d.last_seen) AS ts, d.decode_input, d.forward_start, d.decode_why,
           d.decode_output, d.output_place, NULL::INTEGER AS prompt_tokens,
           string_agg(DISTINCT p.why, '; ' ORDER BY p.why) AS prefill_why
    FROM placeholder p JOIN dark_rooms d ON d.room = p.room AND d.node <> p.node
    WHERE d.decode_input > 1
      AND d.room NOT IN (SELECT bootstrap_room FROM gateway WHERE bootstrap_room IS NOT NULL)
      AND coalesce(d.forward_start, d.started, d.last_seen)
          >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
      AND coalesce(d.forward_start, d.started, d.last_seen)
          < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
    GROUP BY ALL
), reach AS (  -- how long a decode node without page telemetry runs a room: its longest, from its own lines
    SELECT node, coalesce(max(finished - coalesce(started, forward_start)), INTERVAL 1 MINUTE) AS longest
    FROM dark_rooms GROUP BY node
), orphaned AS (  -- a placeholder no decode node's log names, made while a decode log was silent (an outage)
    SELECT coalesce(min(g.request_id), 'room:' || p.room) AS request_id, min(g.account_id) AS account_id,
           'customer' AS cohort, o.node, NULL AS logged_prefill, min(p.node) AS placeholder_node, p.room,
           NULL::INTEGER AS http_status, NULL::INTEGER AS completion_tokens, min(p.ts) AS ts,
           NULL::BIGINT AS decode_input, NULL::TIMESTAMPTZ AS forward_start, NULL::VARCHAR AS decode_why,
           NULL::BIGINT AS decode_output, NULL::VARCHAR AS output_place, NULL::INTEGER AS prompt_tokens,
           string_agg(DISTINCT p.why, '; ' ORDER BY p.why) || '; missing: no decode node''s log names room ' || p.room
           || ', and ' || o.node || '''s log has an outage from ' || strftime(o.gap_from, '%Y-%m-%dT%H:%M:%SZ')
           || ' to ' || strftime(o.gap_to, '%Y-%m-%dT%H:%M:%SZ') || ' (log_outages): its decode may be among the '
           || 'lines lost' AS prefill_why
    FROM placeholder p
    JOIN log_outages o ON o.source = 'engine_log' AND o.node NOT IN (SELECT node FROM telemetry_nodes)
    LEFT JOIN reach x ON x.node = o.node
    LEFT JOIN gateway g ON g.bootstrap_room = p.room
    WHERE p.room IS NOT NULL AND p.ts <= o.gap_to AND p.ts >= o.gap_from - coalesce(x.longest, INTERVAL 1 MINUTE)
      AND p.room NOT IN (SELECT room FROM dark_rooms)
      AND p.room NOT IN (SELECT room FROM matched WHERE room IS NOT NULL)
      AND p.room NOT IN (SELECT room FROM by_window WHERE room IS NOT NULL)
      AND p.ts >= coalesce((SELECT since FROM replay_window), '-infinity'::TIMESTAMPTZ)
      AND p.ts < coalesce((SELECT "until" FROM replay_window), 'infinity'::TIMESTAMPTZ)
    GROUP BY p.room, o.node, o.gap_from, o.gap_to
), found AS (
    SELECT *, false AS window_only, false AS no_record FROM matched
    UNION ALL SELECT *, true, false FROM by_window
    UNION ALL SELECT *, false, true FROM unnamed
    UNION ALL SELECT *, false, false FROM orphaned
)
SELECT request_id, account_id, cohort, node, coalesce(logged_prefill, placeholder_node) AS prefill_node, room,
       http_status, completion_tokens, ts, decode_input,
       -- the prompt length alone proves no placeholder: a prefill line must show it for `confirmed`
       CASE WHEN NOT window_only AND decode_input > 1 AND http_status BETWEEN 200 AND 299 AND delivered > 0
            THEN 'confirmed' ELSE 'indeterminate' END AS status,
       coalesce(forward_start, ts) AS first_exposed_at,
       concat_ws('; ', prefill_why, decode_why,
                 CASE WHEN no_record THEN 'missing: no gateway record names room ' || room || ' (lost, rejected, or in '
                      || 'a file not read): the account is unknown; the request id is the rid decode node ' || node
                      || ' logged' END,
                 CASE WHEN decode_input IS NULL THEN 'missing: no Req Time Stats or request.finished line of decode node '
                      || node || ' names room ' || room || ' (its log may be lost or cut)' END,
                 CASE WHEN http_status BETWEEN 200 AND 299 AND completion_tokens > 0
                      THEN 'delivered: HTTP ' || http_status || ', ' || completion_tokens || ' completion tokens'
                      WHEN http_status BETWEEN 200 AND 299 AND delivered > 0
                      THEN 'delivered: HTTP ' || http_status || ', ' || delivered || ' completion tokens by the decode '
                           || 'node''s log (' || output_place || '; the gateway logs no token counts)'
                      ELSE 'missing: delivery not shown (HTTP ' || coalesce(http_status::VARCHAR, 'unknown') || ', '
                           || coalesce(completion_tokens::VARCHAR, 'unknown') || ' completion tokens)' END) AS why
FROM (SELECT *,
             -- tokens the client got: the gateway's count; where its format logs none (SGLang's router), the
             -- decode node's own count of the tokens it generated for the response the gateway returned
             coalesce(completion_tokens, decode_output) AS delivered
      FROM found);

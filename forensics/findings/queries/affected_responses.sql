-- One row per client request that attended another request's data, or whose answer is indeterminate:
-- the contract's affected_responses.csv. Evidence `pages` comes from page events, `signature` from
-- engine logs alone (sources not in the evidence; possible_sources bounds them), `none` where neither
-- exists: a response whose only reason is its node's (no page events, an engine whose lines no
-- logs-only rule reads: unread_responses), whose sources possible_sources bounds too. exposed_slots of a
-- signature response is empty: how many of its slots held others' data the logs cannot say. A response
-- a late transfer may have written into, on a node without page telemetry (late_write_responses), is
-- indeterminate, kind foreign_write.
-- A response the page events show exposed whose room no gateway record names (the record missing,
-- rejected, or unjoined) is still reported: its request id is then the rid the decode node logged for
-- the room (else "room:<room>"), its account empty (unknown) and its reason says so.
-- A response served in a log outage (outage_responses) is indeterminate with that reason, unless its
-- exposure is confirmed; a signature response keeps its own status and carries the reason. So is a
-- response on a node without page events whose engine's lines no logs-only rule reads (unread_responses).
-- An engine's integrity line that names the request (integrity_responses) confirms it, or makes it
-- indeterminate if nothing confirms it, and its reason cites the line (file:line); a response no other
-- evidence names that such a line names is added. A line is engine-log evidence: a response whose only
-- reason was its node's (evidence `none`) that a line names is `signature`, in one row as before.
-- grain: request_id; reads: exposures, recipient_slots, room_requests, room_flags, missing_rooms,
--        outage_responses, unread_responses, signature_responses, late_write_responses, engine_requests,
--        integrity_responses, telemetry_nodes; params: none
CREATE OR REPLACE TABLE affected_responses AS
WITH seg AS (  -- distinct slots per recipient, whatever their source (recipient_slots: the union of its
               -- ranges on each node)
    SELECT rr.request_id, sum(x.slots)::BIGINT AS exposed_slots
    FROM recipient_slots x
    JOIN (SELECT DISTINCT node, room, request_id FROM room_requests) rr  -- a request id in two gateway
      ON rr.node = x.node AND rr.room = x.recipient_room                -- records counts its slots once
    GROUP BY rr.request_id
), exposed AS (
    SELECT recipient_request_id AS request_id,
           CASE WHEN bool_or(status = 'confirmed') THEN 'confirmed' ELSE 'indeterminate' END AS status,
           string_agg(DISTINCT kind, ';' ORDER BY kind) AS kinds, min(first_exposed_at) AS first_exposed_at,
           count(DISTINCT source_request_id) FILTER (WHERE source_request_id <> '')
             + count(DISTINCT source_room) FILTER (WHERE source_request_id = '') AS source_requests,
           string_agg(DISTINCT node, ';' ORDER BY node) AS nodes
    FROM exposures WHERE recipient_request_id <> '' GROUP BY 1
), flagged AS (
    SELECT rr.request_id, string_agg(DISTINCT f.node || ': ' || f.reason, '; ' ORDER BY f.node || ': ' || f.reason) AS reason
    FROM room_flags f JOIN room_requests rr ON rr.node = f.node AND rr.room = f.room
    GROUP BY 1
), missing AS (  -- no page events of its own on a node with telemetry; or served in a log outage
    SELECT request_id, string_agg(DISTINCT reason, '; ' ORDER BY reason) AS reason, bool_and(unread) AS unread
    FROM (
        SELECT request_id, node || ': no page events for this request on a node with telemetry' AS reason,
               false AS unread
        FROM missing_rooms
        UNION ALL
        SELECT request_id, node || ': ' || reason, false FROM outage_responses
        UNION ALL
        SELECT request_id, node || ': ' || reason, true FROM unread_responses
    ) GROUP BY 1
), page_based AS (
    SELECT request_id,
           CASE WHEN x.status = 'confirmed' THEN 'confirmed' ELSE 'indeterminate' END AS status,
           -- no page event and no line speaks of it: only its node's lack of evidence makes it indeterminate
           CASE WHEN x.request_id IS NULL AND f.request_id IS NULL AND m.unread THEN 'none' ELSE 'pages' END
               AS evidence,
           coalesce(x.kinds, '') AS kinds, x.first_exposed_at,
           coalesce(s.exposed_slots, 0) AS exposed_slots, x.source_requests::VARCHAR AS source_requests,
           concat_ws('; ', f.reason, m.reason) AS reason
    FROM exposed x FULL JOIN flagged f USING (request_id) FULL JOIN missing m USING (request_id)
    LEFT JOIN seg s USING (request_id)
), named AS MATERIALIZED (  -- the gateway rows of these requests only, before the cohort lookup
    SELECT * FROM gateway WHERE request_id IN (SELECT request_id FROM page_based)
), base AS (
SELECT DISTINCT  -- gateway records of one request id that differ only in fields not shown here: one row
       g.request_id, g.account_id, coalesce(c.cohort, 'customer') AS cohort, p.status, p.evidence, p.kinds,
       p.first_exposed_at, p.exposed_slots, p.source_requests, g.status AS http_status, g.completion_tokens,
       g.decode_node, g.prefill_node, g.bootstrap_room AS room,
       CASE WHEN p.status = 'confirmed' THEN '' ELSE p.reason END AS reason
FROM page_based p JOIN named g USING (request_id)
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
WHERE p.status = 'confirmed' OR p.request_id NOT IN (SELECT request_id FROM signature_responses)
UNION ALL
SELECT s.request_id, s.account_id, s.cohort, s.status, 'signature', 'stale', s.first_exposed_at, NULL, '',
       s.http_status, s.completion_tokens, s.node, s.prefill_node, s.room,
       concat_ws('; ', s.why, 'decode node ' || s.node || ' has no page telemetry: whose data it attended is not in '
                 || 'the evidence (possible_sources.csv lists every request whose KV it could have been)', p.reason)
FROM signature_responses s LEFT JOIN page_based p USING (request_id)
WHERE p.status IS DISTINCT FROM 'confirmed'
UNION ALL  -- a late transfer may have landed in its pages on a node without page telemetry
SELECT l.request_id, any_value(l.account_id), any_value(l.cohort), 'indeterminate', 'signature', 'foreign_write',
       min(l.first_exposed_at), NULL, '', any_value(l.http_status), any_value(l.completion_tokens), any_value(l.node),
       any_value(l.prefill_node), any_value(l.room),
       count(*) || ' late transfer(s) may have written into its pages: ' || string_agg(l.why, '; ' ORDER BY l.why)
       || '; decode node ' || any_value(l.node) || ' has no page telemetry: whether they did is not in the evidence '
       || '(possible_sources.csv)'
FROM late_write_responses l
WHERE l.request_id NOT IN (SELECT request_id FROM signature_responses)
  AND l.request_id NOT IN (SELECT request_id FROM page_based)
GROUP BY l.request_id
UNION ALL  -- exposed, with no gateway record: the account is unknown, never dropped
SELECT coalesce(er.rid, 'room:' || x.recipient_room) AS request_id, NULL AS account_id, 'customer' AS cohort,
       CASE WHEN bool_or(x.status = 'confirmed') THEN 'confirmed' ELSE 'indeterminate' END, 'pages',
       string_agg(DISTINCT x.kind, ';' ORDER BY x.kind), min(x.first_exposed_at), any_value(s.slots),
       (count(DISTINCT x.source_request_id) FILTER (WHERE x.source_request_id <> '')
         + count(DISTINCT x.source_room) FILTER (WHERE x.source_request_id = ''))::VARCHAR,
       NULL, NULL, x.node, NULL, x.recipient_room,
       'no gateway record names room ' || x.recipient_room || ' on ' || x.node
       || ': the account is unknown; the request id is the rid its decode node logged' AS reason
FROM exposures x
LEFT JOIN recipient_slots s ON s.node = x.node AND s.recipient_room = x.recipient_room
LEFT JOIN (SELECT node, room, min(rid) AS rid FROM engine_requests
           WHERE room IS NOT NULL AND rid IS NOT NULL AND rid <> '' GROUP BY node, room) er
       ON er.node = x.node AND er.room = x.recipient_room
WHERE x.recipient_request_id = ''
GROUP BY x.node, x.recipient_room, er.rid
), lines AS (  -- the engines' integrity lines that name the request (integrity_responses)
    SELECT request_id, bool_or(effect = 'confirm') AS confirm, any_value(node) AS node, any_value(room) AS room,
           string_agg(DISTINCT why, '; ' ORDER BY why) AS why
    FROM integrity_responses GROUP BY request_id
)
SELECT b.request_id, b.account_id, b.cohort,
       CASE WHEN l.confirm THEN 'confirmed' WHEN l.request_id IS NOT NULL THEN 'indeterminate' ELSE b.status END
         AS status,
       -- a line that names it is evidence of its engine's logs: no longer `none`
       CASE WHEN l.request_id IS NOT NULL AND b.evidence = 'none' THEN 'signature' ELSE b.evidence END AS evidence,
       b.kinds, b.first_exposed_at, b.exposed_slots, b.source_requests, b.http_status,
       b.completion_tokens, b.decode_node, b.prefill_node, b.room,
       CASE WHEN l.request_id IS NULL THEN b.reason ELSE concat_ws('; ', nullif(b.reason, ''), l.why) END AS reason
FROM base b LEFT JOIN lines l ON l.request_id = b.request_id AND (b.status <> 'confirmed' OR l.confirm)
UNION ALL  -- a response no other evidence names, that an integrity line confirms or doubts: its node's evidence
SELECT g.request_id, any_value(g.account_id), any_value(coalesce(c.cohort, 'customer')),
       CASE WHEN any_value(l.confirm) THEN 'confirmed' ELSE 'indeterminate' END,
       CASE WHEN any_value(l.node) IN (SELECT node FROM telemetry_nodes) THEN 'pages' ELSE 'signature' END, '',
       NULL, NULL, '', any_value(g.status), any_value(g.completion_tokens), any_value(g.decode_node),
       any_value(g.prefill_node), any_value(g.bootstrap_room), any_value(l.why)
FROM lines l JOIN gateway g USING (request_id)
LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
WHERE l.request_id NOT IN (SELECT request_id FROM base)
GROUP BY g.request_id;

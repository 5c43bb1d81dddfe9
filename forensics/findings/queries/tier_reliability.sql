-- tier_reliability (one row per indeterminate tier of responses without page evidence): how often a
-- response the engine logs alone leave indeterminate was truly affected, measured the way content_tier
-- measures the content matching: the same logs-only rule applied to the decode nodes with page
-- telemetry (their engine logs are in the same bundle), scored against what their page events prove.
-- - late_write: the rooms late_write_rule flags there (a late transfer may have written into their
--   pages), delivered, other than the placeholder responses (those are the signature tier's, as on the
--   nodes without page telemetry);
-- - signature: the rooms whose engine logs show the placeholder signature there (a prefill line of
--   the room's placeholder: over-length, or input length 1; the decode node ran the room with an input
--   above 1), delivered: every such response, whatever the allocator model says of its pool.
-- A response the page events themselves leave indeterminate settles nothing and is not a case; one
-- they show affected (confirmed, any kind) counts as affected. recall: of the responses the page
-- events confirm affected there by the tier's mechanism (foreign_write, stale), the share the rule
-- flags. indeterminate: the responses on the nodes without page telemetry the figure speaks for.
-- Where no decode node has page telemetry, or none had such a response, no reliability is measured and
-- the sentence says so: never a share of 0 where nothing was counted.
-- grain: tier; reads: late_write_rule, late_write_responses, signature_responses, affected_responses,
--        engine_requests, node_config, telemetry_nodes, gateway, replay_window; params: none
CREATE OR REPLACE TABLE tier_reliability AS
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
), signature AS (
    SELECT DISTINCT d.request_id FROM delivered d
    JOIN full_input f USING (node, room) SEMI JOIN placeholder p ON p.room = d.room
), late AS (
    SELECT DISTINCT d.request_id FROM delivered d
    SEMI JOIN late_write_rule r ON r.node = d.node AND r.room = d.room
    WHERE d.request_id NOT IN (SELECT request_id FROM signature)
), flagged AS (
    SELECT 'late_write' AS tier, request_id FROM late UNION ALL SELECT 'signature', request_id FROM signature
), verdict AS (  -- what the page events say of each flagged response
    SELECT f.tier, f.request_id, a.status
    FROM flagged f LEFT JOIN (SELECT * FROM affected_responses WHERE evidence = 'pages') a USING (request_id)
), proven AS (  -- the responses the page events confirm affected by each tier's mechanism
    SELECT DISTINCT CASE e.kind WHEN 'foreign_write' THEN 'late_write' ELSE 'signature' END AS tier,
           e.recipient_request_id AS request_id
    FROM exposures e
    WHERE e.status = 'confirmed' AND e.node IN (SELECT node FROM lit) AND e.recipient_request_id <> ''
      AND e.kind IN ('foreign_write', 'stale')
), tiers AS (
    SELECT * FROM (VALUES ('late_write', 'responses a late transfer may have written into'),
                          ('signature', 'responses the engine logs show decoded over a placeholder')) t(tier, what)
), m AS (
    SELECT t.tier, t.what,
           (SELECT string_agg(node, ', ' ORDER BY node) FROM lit) AS measured_on,
           (SELECT count(*) FROM verdict v WHERE v.tier = t.tier AND v.status IS DISTINCT FROM 'indeterminate') AS cases,
           (SELECT count(*) FROM verdict v WHERE v.tier = t.tier AND v.status = 'confirmed') AS affected,
           (SELECT count(*) FROM verdict v WHERE v.tier = t.tier AND v.status = 'indeterminate') AS unsettled,
           (SELECT count(*) FROM proven p WHERE p.tier = t.tier) AS page_affected,
           (SELECT count(*) FROM proven p SEMI JOIN flagged f USING (tier, request_id) WHERE p.tier = t.tier) AS rule_found,
           CASE t.tier
               WHEN 'late_write' THEN (SELECT count(*) FROM affected_responses a
                   WHERE a.status = 'indeterminate' AND a.evidence = 'signature' AND a.kinds = 'foreign_write')
               ELSE (SELECT count(*) FROM signature_responses s WHERE s.status = 'indeterminate')
           END AS indeterminate
    FROM tiers t
)
SELECT tier, measured_on, cases, affected, CASE WHEN cases > 0 THEN round(affected / cases, 3) END AS share,
       unsettled, page_affected, rule_found,
       CASE WHEN page_affected > 0 THEN round(rule_found / page_affected, 3) END AS recall, indeterminate,
       CASE WHEN measured_on IS NULL THEN 'no reliability could be measured: no decode node has page records to settle '
                                          || 'what the engine logs leave open'
            WHEN cases = 0 THEN 'no reliability could be measured: no node with page records had such a response'
            ELSE 'on the nodes with page records (' || measured_on || '), ' || affected || ' of ' || cases
                 || ' such response' || CASE WHEN cases = 1 THEN '' ELSE 's' END || ' ('
                 || round(100 * affected / cases)::INTEGER || '%) ' || CASE WHEN affected = 1 THEN 'was' ELSE 'were' END
                 || ' affected'
       END AS basis, what
FROM m
ORDER BY tier;

-- tier_reliability (one row per indeterminate tier of responses without page evidence): how often a
-- response the engine logs alone leave indeterminate was truly affected, measured the way content_tier
-- measures the content matching: the same logs-only rule applied to the decode nodes with page
-- telemetry (their engine logs are in the same bundle), scored against what their page events prove
-- (tier_cases: the responses each rule flags there, with their page verdict).
-- A response the page events themselves leave indeterminate settles nothing and is not a case; one
-- they show affected (confirmed, any kind) counts as affected. measured_on: the decode nodes with page
-- telemetry (late_write), the calibration nodes the allocator model replayed (signature). recall
-- (late_write): of the responses other than placeholder ones the page events there confirm a foreign
-- write into, the share the rule flags. indeterminate: the responses on the nodes without page
-- telemetry the figure speaks for. Where nothing was measured the sentence says why: never a share of
-- 0 where nothing was counted.
-- grain: tier; reads: tier_cases, calibration_rooms, exposures, affected_responses, signature_responses,
--        model_rooms, allocator_model, node_config, telemetry_nodes; params: none
CREATE OR REPLACE TABLE tier_reliability AS
WITH lit AS (  -- the decode nodes with page telemetry: where page events settle what the logs suspect
    SELECT node FROM telemetry_nodes WHERE node IN (SELECT node FROM node_config WHERE role = 'decode')
), proven AS (  -- the responses the page events confirm a foreign write into, other than placeholder ones
    SELECT DISTINCT 'late_write' AS tier, e.recipient_request_id AS request_id
    FROM exposures e
    WHERE e.status = 'confirmed' AND e.node IN (SELECT node FROM lit) AND e.recipient_request_id <> ''
      AND e.kind = 'foreign_write'
      AND e.recipient_request_id NOT IN (SELECT request_id FROM tier_cases WHERE tier = 'signature')
), tiers AS (
    SELECT * FROM (VALUES ('late_write', 'responses a late transfer may have written into'),
                          ('signature', 'responses the engine logs show decoded over a placeholder, in pages '
                                        || 'the allocator model cannot show written over')) t(tier, what)
), m AS (
    SELECT t.tier, t.what,
           CASE t.tier WHEN 'late_write' THEN (SELECT string_agg(node, ', ' ORDER BY node) FROM lit)
                ELSE (SELECT string_agg(DISTINCT node, ', ' ORDER BY node) FROM calibration_rooms) END AS measured_on,
           (SELECT count(*) FROM lit) AS lit,
           (SELECT count(*) FROM tier_cases v WHERE v.tier = t.tier AND v.counted AND v.pages <> 'indeterminate') AS cases,
           (SELECT count(*) FROM tier_cases v WHERE v.tier = t.tier AND v.counted AND v.pages = 'confirmed') AS affected,
           (SELECT count(*) FROM tier_cases v WHERE v.tier = t.tier AND v.counted AND v.pages = 'indeterminate') AS unsettled,
           (SELECT count(*) FROM proven p WHERE p.tier = t.tier) AS page_affected,
           (SELECT count(*) FROM proven p SEMI JOIN tier_cases f USING (tier, request_id) WHERE p.tier = t.tier) AS rule_found,
           CASE t.tier
               WHEN 'late_write' THEN (SELECT count(*) FROM affected_responses a
                   WHERE a.status = 'indeterminate' AND a.evidence = 'signature' AND a.kinds = 'foreign_write')
               ELSE (SELECT count(*) FROM signature_responses s  -- signature_status's check
                   LEFT JOIN model_rooms r ON r.node = s.node AND r.room = s.room
                   LEFT JOIN allocator_model a ON a.node = s.node
                   WHERE s.status = 'indeterminate' AND NOT coalesce(r.written_members >= a.members, false))
           END AS indeterminate
    FROM tiers t
)
SELECT tier, measured_on, cases, affected, CASE WHEN cases > 0 THEN round(affected / cases, 3) END AS share,
       unsettled, page_affected, rule_found,
       CASE WHEN page_affected > 0 THEN round(rule_found / page_affected, 3) END AS recall, indeterminate,
       CASE WHEN lit = 0 THEN 'no reliability could be measured: no decode node has page records to settle '
                              || 'what the engine logs leave open'
            WHEN measured_on IS NULL THEN 'no reliability could be measured: the allocator model was replayed on no '
                                          || 'node with page records'
            WHEN cases = 0 THEN 'no reliability could be measured: no node with page records had such a response'
            ELSE 'on the nodes with page records (' || measured_on || '), ' || affected || ' of ' || cases
                 || ' such response' || CASE WHEN cases = 1 THEN '' ELSE 's' END || ' ('
                 || round(100 * affected / cases)::INTEGER || '%) ' || CASE WHEN affected = 1 THEN 'was' ELSE 'were' END
                 || ' affected'
       END AS basis, what
FROM m
ORDER BY tier;

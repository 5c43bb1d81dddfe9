-- Possible sources, the windows: per response without page evidence (signature_responses, and
-- unread_responses: a node whose engine's lines no logs-only rule reads), the window its possible
-- sources lie in: a source is possible unless it entered the scheduler after the response's decode
-- finished (started > finished), or a start-up of the node lies after the source's last line and no
-- later than the response's start (gone_at <= started).
-- clock: 'node', the decode node's own lines (dark_rooms); 'gateway' on a node whose pool is bounded by
-- the gateway's times (possible_pool): started is the gateway's receive time less $gw_slack_us (the
-- response reached the node no earlier); finished its end (ts + duration_ms) with the slack of the end
-- and of the source's receive time (3 x $gw_slack_us), where the gateway logged a success with its
-- duration, else empty (unknown: a source received at any time stays possible). A start-up whose latest
-- gateway time is no later than the start then emptied the pool first.
-- grain: recipient request, node; reads: signature_responses, unread_responses, dark_rooms, gateway,
--        request_cohort; params: gw_slack_us
CREATE OR REPLACE TABLE possible_windows AS
WITH unread AS (SELECT DISTINCT node FROM unread_responses),
unread_to AS (  -- each such node, and whether a record that names no decode node may have been served there
    SELECT node, bool_or(NOT node_named) AS any_record FROM unread_responses GROUP BY node
),
gw AS (  -- the responses on those nodes, on the gateway's clock (each record of the request id; a record
         -- that names no decode node, on each node unread_responses says may have served it)
    SELECT g.request_id, g.to_node AS node, min(g.bootstrap_room) AS room, min(g.account_id) AS account_id,
           coalesce(min(c.cohort), 'customer') AS cohort,
           min(g.ts) - to_microseconds($gw_slack_us) AS started,
           CASE WHEN bool_and(g.status BETWEEN 200 AND 299 AND g.duration_ms IS NOT NULL AND g.ts IS NOT NULL)
                THEN max(g.ts + to_microseconds((round(g.duration_ms * 1000) + 3 * $gw_slack_us)::BIGINT)) END
               AS finished
    FROM (SELECT g.*, g.decode_node AS to_node FROM gateway g WHERE g.decode_node IN (SELECT node FROM unread)
          UNION ALL
          SELECT g.*, u.node FROM gateway g JOIN unread_to u ON u.any_record WHERE g.decode_node IS NULL) g
    LEFT JOIN request_cohort c ON c.file_id = g.file_id AND c.row = g.row
    GROUP BY g.request_id, g.to_node
), rec AS (  -- the responses on those nodes: the signature responses, and the rest of the unread ones
    SELECT request_id, account_id, cohort, node, room FROM signature_responses WHERE node IN (SELECT node FROM unread)
    UNION ALL
    SELECT DISTINCT request_id, NULL, NULL, node, NULL FROM unread_responses
    WHERE (request_id, node) NOT IN (SELECT (request_id, node) FROM signature_responses)
)
SELECT r.request_id AS recipient_request_id, r.account_id AS recipient_account_id, r.cohort AS recipient_cohort,
       r.node, r.room AS recipient_room, o.started, o.finished, 'node' AS clock,
       NULL::BIGINT AS sources  -- how many possible sources: set by forensics.findings.possible.possible_reach
FROM signature_responses r LEFT JOIN dark_rooms o ON o.node = r.node AND o.room = r.room
WHERE r.node NOT IN (SELECT node FROM unread)
UNION ALL
SELECT r.request_id, coalesce(r.account_id, g.account_id), coalesce(r.cohort, g.cohort), r.node,
       coalesce(r.room, g.room), g.started, g.finished, 'gateway', NULL
FROM rec r LEFT JOIN gw g ON g.request_id = r.request_id AND g.node = r.node;

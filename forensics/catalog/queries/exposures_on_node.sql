-- Entry view: every exposure on a node, with when it happened and who was on each side. One row per
-- (recipient request, source request, node, kind) pair of exposures, and one per possible pair
-- (status possible: no page evidence; first_exposed_at is the recipient's own, when it started decoding
-- over the slots, so a time filter finds the responses of a node without page telemetry too).
--   SELECT * FROM exposures_on_node WHERE node = 'decode-1'
--     AND first_exposed_at >= '2026-09-01T00:00:00Z' AND first_exposed_at < '2026-09-02T00:00:00Z';
-- grain: node, recipient_request_id, source_request_id, kind; reads: exposures, possible_sources, affected_responses, gateway;
-- params: none
WITH received AS (
    SELECT request_id, min(ts) AS received_at FROM internal.gateway GROUP BY request_id
)
SELECT e.node, e.first_exposed_at, r.received_at AS recipient_received_at, e.status, e.kind,
       e.recipient_request_id, e.recipient_account_id, e.recipient_cohort,
       e.source_request_id, e.source_account_id, e.source_cohort, e.slots, e.likelihood,
       e.recipient_room, e.source_room
FROM (
    SELECT node, first_exposed_at, status, kind, recipient_request_id, recipient_account_id, recipient_cohort,
           source_request_id, source_account_id, source_cohort, slots, NULL::DOUBLE AS likelihood,
           recipient_room, source_room
    FROM internal.exposures
    UNION ALL
    SELECT p.node, a.first_exposed_at, 'possible', NULL, p.recipient_request_id, p.recipient_account_id,
           p.recipient_cohort, p.source_request_id, p.source_account_id, p.source_cohort, NULL, p.likelihood,
           p.recipient_room, p.source_room
    FROM internal.possible_sources p
    LEFT JOIN (SELECT request_id, min(first_exposed_at) AS first_exposed_at FROM internal.affected_responses
               GROUP BY request_id) a ON a.request_id = p.recipient_request_id
) e
LEFT JOIN received r ON r.request_id = e.recipient_request_id

-- One row per (recipient request, source request, node, kind): the contract's exposures.csv.
-- slots = distinct KV token slots of the recipient that held (or, where the evidence cannot settle
-- it, may have held) the source's data while it attended them; slots_confirmed = those it surely did;
-- cross_account: whether the two accounts differ (the cross_account macro). source_candidate_accounts,
-- recipient_candidate_accounts: where no gateway record names the room, the accounts of the records it may
-- be (room_candidates: the gateway join's assignment left it open), ';'-separated; any of them may be the
-- room's, so each is named (and notified: account_requests).
-- A pair first seen inside an outage of its node's page events (log_outages) is indeterminate, none of
-- its slots confirmed: the node's frees and allocations of that time are lost, so a landing there may
-- have met pages their holder had already given back.
-- grain: recipient, source, node, kind; reads: exposure_segments, exposure_certain, room_requests,
--        room_candidates, log_outages; params: none
CREATE OR REPLACE TABLE exposures AS
WITH room_candidate_accounts AS (
    SELECT room, string_agg(DISTINCT account_id, ';' ORDER BY account_id) AS accounts
    FROM room_candidates WHERE account_id IS NOT NULL GROUP BY room
), e AS (  -- per (node, recipient room, source room, kind) first, on integer keys: the join and the
             -- group by request ids below then see one row per pair instead of one per range
    SELECT node, recipient_room, source_room, kind, sum(seg_end - seg_start) AS slots, bool_or(certain) AS certain,
           bool_and(all_certain) AS all_certain, min(first_ts) AS first_ts
    FROM exposure_segments GROUP BY node, recipient_room, source_room, kind
), lost AS (  -- the pairs first seen while their node's page events have an outage
    SELECT DISTINCT e.node, e.recipient_room, e.source_room, e.kind FROM e
    JOIN log_outages o ON o.node = e.node AND o.source = 'pages' AND e.first_ts BETWEEN o.gap_from AND o.gap_to
)
SELECT coalesce(rr.request_id, '') AS recipient_request_id, coalesce(sr.request_id, '') AS source_request_id,
       rr.account_id AS recipient_account_id, sr.account_id AS source_account_id, e.node, e.kind,
       e.slots::BIGINT AS slots,
       CASE WHEN e.certain AND l.node IS NULL THEN 'confirmed' ELSE 'indeterminate' END AS status,
       e.first_ts AS first_exposed_at,
       e.recipient_room, e.source_room, rr.cohort AS recipient_cohort, sr.cohort AS source_cohort,
       CASE WHEN l.node IS NOT NULL THEN 0 WHEN e.all_certain THEN e.slots ELSE coalesce(c.slots, 0) END::BIGINT
           AS slots_confirmed,
       cross_account(rr.account_id, sr.account_id) AS cross_account,
       CASE WHEN sr.request_id IS NULL THEN sc.accounts END AS source_candidate_accounts,
       CASE WHEN rr.request_id IS NULL THEN rc.accounts END AS recipient_candidate_accounts
FROM e
LEFT JOIN exposure_certain c USING (node, recipient_room, source_room, kind)
LEFT JOIN lost l USING (node, recipient_room, source_room, kind)
LEFT JOIN (SELECT DISTINCT node, room, request_id, account_id, cohort FROM room_requests) rr  -- a record logged
       ON rr.node = e.node AND rr.room = e.recipient_room                    -- twice counts once
LEFT JOIN (SELECT DISTINCT ON (room) room, request_id, account_id, cohort FROM room_requests ORDER BY room, request_id) sr
       ON sr.room = e.source_room
LEFT JOIN room_candidate_accounts sc ON sc.room = e.source_room
LEFT JOIN room_candidate_accounts rc ON rc.room = e.recipient_room;
-- No GROUP BY over the joined rows (it took 0.8 s of 1.45 at 10M events): every row of `e` is one
-- (node, recipient room, source room, kind); `sr` gives it at most one source; the distinct mappings
-- `rr` that match it differ in request_id, account_id or cohort (request_id is never NULL or empty:
-- ingest rejects such rows), so no two output rows share all of their columns.

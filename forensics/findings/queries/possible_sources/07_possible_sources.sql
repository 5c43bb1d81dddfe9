-- Possible sources, the pairs (a view): the pairs (spec section 7) of every response without page evidence: every
-- request whose KV could have been in the slots it attended. That is KV written on its decode node (a
-- request decoded there, sent there by the gateway, or aborted there with a transfer that may land late)
-- and not provably gone before the response allocated. A superset by construction: a pair is left out
-- only when the node's own clock proves it impossible:
--   - the source entered the node's scheduler (its Req Time Stats start_time) after the response's
--     decode finished (its Req Time Stats line), so nothing of it was in the pool while the response
--     attended it;
--   - a server start-up on the node lies after the source's last line there and no later than the
--     response's start_time (possible_pool.gone_at): a start empties the pool. Never for an aborted
--     source, whose late transfer may land after its last line.
-- On a node whose engine's lines no logs-only rule reads (possible_pool.clock 'gateway'), both times are
-- the gateway's: the source's receive time, and the response's end where it logged a success.
-- The pool's capacity proves nothing gone (a freed page can stay unreused for days), so it is not used.
-- A VIEW: the pairs grow as recipients x requests in their windows (billions at a large cluster's
-- volume), so they are materialised only when asked for (possible_sources.csv, or a query).
-- likelihood: the allocator model's (forensics.findings.likelihood) calibrated rate for the number of its
-- replays that found the pair, where the model replayed both rooms and page evidence calibrated it, at
-- least 0.001 (a possible pair is never ruled out by a model); else empty (unknown, never 0).
-- model_replays: how many of the model's replays found the pair (0 where it replayed both rooms and none
-- did; empty where it did not replay them): without calibration it ranks nothing. cross_account: whether
-- the two accounts differ (the cross_account macro). content_shared: rare text fingerprints the
-- response shares with the source (content_matches; empty: none, or the gateway logs no text); a pair
-- with a content match has basis "content: ...". source_candidate_accounts, recipient_candidate_accounts:
-- where no gateway record names the room, the accounts of the records it may be (room_candidates), as in
-- exposures.
-- grain: recipient request, source request (or engine rid without a gateway record), node;
-- reads: possible_windows, possible_pool, possible_extra, source_likelihood, likelihood_map, model_rooms,
--        content_matches, room_candidates;
-- params: none
CREATE OR REPLACE VIEW possible_sources AS
WITH room_candidate_accounts AS (
    SELECT room, string_agg(DISTINCT account_id, ';' ORDER BY account_id) AS accounts
    FROM room_candidates WHERE account_id IS NOT NULL GROUP BY room
), pairs AS (
SELECT r.recipient_request_id, coalesce(s.request_id, '') AS source_request_id, r.recipient_account_id,
       s.account_id AS source_account_id, r.node,
       CASE WHEN s.clock = 'gateway' THEN 'sent to ' || r.node || ' by the gateway, which received it '
                 || coalesce('at ' || strftime(s.started, '%Y-%m-%dT%H:%M:%S.%gZ'), 'at a time it did not log') || ', '
                 || CASE WHEN r.finished IS NULL THEN 'the response''s end is not logged as a success with its duration'
                         ELSE 'before the response ended (' || strftime(r.finished, '%Y-%m-%dT%H:%M:%S.%gZ')
                              || ' at the latest)' END
                 || ', on the gateway''s clock; no line of ' || r.node || '''s engine says whose KV a response read'
            WHEN s.outage THEN 'its decode on ' || r.node || ' may be among the lines an outage of the node''s log took ('
                 || s.place || ')'
            WHEN s.aborted THEN 'aborted on ' || r.node || ' (' || s.place || '): its transfer may have landed late'
            WHEN s.started IS NOT NULL THEN 'decoded on ' || r.node || ' (' || s.place || '), entered its scheduler at '
                 || strftime(s.started, '%Y-%m-%dT%H:%M:%S.%gZ') || ' on the node''s clock, '
                 || CASE WHEN r.finished IS NULL THEN 'the response''s decode end is not logged'
                         ELSE 'before the response''s decode ended (' || strftime(r.finished, '%Y-%m-%dT%H:%M:%S.%gZ') || ')' END
            WHEN s.place IS NOT NULL THEN 'logged on ' || r.node || ' (' || s.place || ') without a start time'
            ELSE 'sent to ' || r.node || ' by the gateway; no line of its log names the room: its KV may have been written at any time'
       END || CASE WHEN s.request_id IS NULL THEN '; no gateway record (engine rid ' || coalesce(s.rid, '?') || ')' ELSE '' END
           || '; no start-up of ' || r.node || ' in between' AS basis,
       r.recipient_cohort, s.cohort AS source_cohort, r.recipient_room, s.room AS source_room
FROM possible_windows r JOIN possible_pool s ON s.node = r.node AND NOT coalesce(s.room = r.recipient_room, false)
WHERE s.request_id IS DISTINCT FROM r.recipient_request_id
  AND possible_pair(s.started, s.gone_at, r.started, r.finished)
UNION ALL
SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id, node, basis,
       recipient_cohort, source_cohort, recipient_room, source_room
FROM possible_extra
)
SELECT p.recipient_request_id, p.source_request_id, p.recipient_account_id, p.source_account_id, p.node,
       CASE WHEN cm.content_match THEN 'content: the response shares ' || cm.shared || ' rare text fingerprints with '
                 || 'the source''s ' || cm.source_side || ' (content_matches.csv); ' ELSE '' END || p.basis AS basis,
       CASE WHEN mr.room IS NOT NULL AND ms.room IS NOT NULL AND m.likelihood IS NOT NULL
            THEN round(greatest(m.likelihood, 0.001), 3) END AS likelihood,
       CASE WHEN mr.room IS NOT NULL AND ms.room IS NOT NULL THEN coalesce(l.hits, 0) END AS model_replays,
       p.recipient_cohort, p.source_cohort, p.recipient_room, p.source_room,
       cross_account(p.recipient_account_id, p.source_account_id) AS cross_account,
       cm.shared AS content_shared,
       CASE WHEN p.source_request_id = '' THEN sc.accounts END AS source_candidate_accounts,
       CASE WHEN p.recipient_request_id = '' THEN rc.accounts END AS recipient_candidate_accounts
FROM pairs p
LEFT JOIN content_matches cm ON NOT cm.checked AND cm.recipient_request_id = p.recipient_request_id
      AND cm.source_request_id = p.source_request_id AND cm.node = p.node
LEFT JOIN source_likelihood l ON l.node = p.node AND l.recipient_room = p.recipient_room AND l.source_room = p.source_room
LEFT JOIN likelihood_map m ON m.node = p.node AND m.hits = coalesce(l.hits, 0)
LEFT JOIN model_rooms mr ON mr.node = p.node AND mr.room = p.recipient_room
LEFT JOIN model_rooms ms ON ms.node = p.node AND ms.room = p.source_room
LEFT JOIN room_candidate_accounts sc ON sc.room = p.source_room
LEFT JOIN room_candidate_accounts rc ON rc.room = p.recipient_room;

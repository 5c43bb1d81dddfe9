-- The placeholder signature's last condition (spec section 7): a complete signature is `confirmed` only
-- where the node's logs show that the slots the response was handed had held earlier requests' KV:
-- every replay of the allocator model (the node's release or learned rule, over its request lines since
-- its last start) puts another room's KV in its pages (model_rooms.written_members = members). Else the
-- logs prove only that it attended KV its own request never wrote: `indeterminate`, the reason giving
-- the tokens given out on the node since its last start-up against its pool, and the replays that found
-- earlier KV there. Such a response may start the incident's window, the first confirmed beside it
-- (forensics.report: the window starts at the first response that may be affected).
-- grain: request_id; reads: signature_responses, model_rooms, allocator_model; params: none
CREATE OR REPLACE TABLE signature_responses AS
WITH checked AS (
    SELECT s.*, s.status = 'confirmed' AND NOT coalesce(m.written_members >= a.members, false) AS unshown,
           CASE WHEN m.room IS NULL OR a.policy IS NULL
                THEN 'no allocator model places the room on ' || s.node
                     || ' (its log gives no pool or page size, or no line of it gives the room''s pre-allocation)'
                ELSE 'since ' || s.node || '''s last start-up ' || m.tokens_before || ' tokens were given to '
                     || 'other requests before this one''s pre-allocation, against a pool of '
                     || a.pool_tokens || '; the allocator model (' || a.policy || ') finds earlier requests'' KV '
                     || 'in its pages in ' || m.written_members || ' of ' || a.members || ' replays'
           END AS pool_why
    FROM signature_responses s
    LEFT JOIN model_rooms m ON m.node = s.node AND m.room = s.room
    LEFT JOIN allocator_model a ON a.node = s.node
)
SELECT * EXCLUDE (unshown, pool_why) REPLACE (
           CASE WHEN unshown THEN 'indeterminate' ELSE status END AS status,
           CASE WHEN unshown THEN why || '; not shown written over: ' || pool_why
                                  || ', so the logs prove only that it attended KV its own request never wrote'
                ELSE why END AS why)
FROM checked;

-- affected_responses.csv (spec section 6): one row per affected response; a request id in two gateway records sorts by every column.
-- grain: request_id; reads: affected_responses; params: none
SELECT request_id, account_id, cohort, status, evidence, kinds, first_exposed_at,
    exposed_slots, source_requests, http_status, completion_tokens, decode_node, prefill_node, room, reason
    FROM affected_responses ORDER BY ALL

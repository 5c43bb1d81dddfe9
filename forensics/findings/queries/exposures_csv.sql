-- exposures.csv (spec section 6): one row per recipient, source, node and kind, in a total order.
-- grain: recipient, source, node, kind, rooms, accounts; reads: exposures; params: none
SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id,
    node, kind, slots, status, first_exposed_at, recipient_cohort, source_cohort, recipient_room, source_room,
    slots_confirmed, cross_account, source_candidate_accounts, recipient_candidate_accounts
    FROM exposures ORDER BY recipient_request_id, source_request_id, node, kind, recipient_room, source_room,
    recipient_account_id, source_account_id, recipient_cohort, source_cohort, slots, status, first_exposed_at,
    slots_confirmed

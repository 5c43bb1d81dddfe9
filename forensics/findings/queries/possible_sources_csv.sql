-- possible_sources.csv (spec section 7): per response without page evidence, every request whose KV
-- could have been in the slots it attended, with the basis; likelihood empty where no calibrated model
-- gives one; model_replays: the model's replays that found the pair.
-- grain: recipient request, source request, node; reads: possible_sources; params: none
SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id, node, basis, likelihood, model_replays,
    recipient_cohort, source_cohort, recipient_room, source_room, cross_account, content_shared,
    source_candidate_accounts, recipient_candidate_accounts
    FROM possible_sources ORDER BY ALL

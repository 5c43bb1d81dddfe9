-- Possible sources, the late-write pairs: the pairs that are not a window's, stored as pairs (few: one per aborted
-- room whose transfer may have landed while a response held pages): a response a late transfer may have
-- written into (late_write_responses) that is no placeholder, with only those aborted rooms (its own
-- transfer filled its pages before it read them).
-- grain: recipient request, source request, node; reads: late_write_responses, signature_responses; params: none
CREATE OR REPLACE TABLE possible_extra AS
SELECT w.request_id AS recipient_request_id, coalesce(w.source_request_id, '') AS source_request_id,
       w.account_id AS recipient_account_id, w.source_account_id, w.node, w.why AS basis,
       w.cohort AS recipient_cohort, w.source_cohort, w.room AS recipient_room, w.source_room
FROM late_write_responses w
WHERE w.request_id NOT IN (SELECT request_id FROM signature_responses);

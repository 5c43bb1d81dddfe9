-- Possible sources, the windows: per response without page evidence (signature_responses), the window
-- its possible sources lie in, on its decode node's clock: a source is possible unless it entered the
-- scheduler after the response's decode finished (started > finished), or a start-up of the node lies
-- after the source's last line and no later than the response's start (gone_at <= started).
-- grain: recipient request, node; reads: signature_responses, dark_rooms; params: none
CREATE OR REPLACE TABLE possible_windows AS
SELECT r.request_id AS recipient_request_id, r.account_id AS recipient_account_id, r.cohort AS recipient_cohort,
       r.node, r.room AS recipient_room, o.started, o.finished,
       NULL::BIGINT AS sources  -- how many possible sources: set by forensics.findings.possible.possible_reach
FROM signature_responses r LEFT JOIN dark_rooms o ON o.node = r.node AND o.room = r.room;

-- Possible sources, content_pairs: the content matches of possible sources as pairs, for joining to possible_sources or the headline
-- (recipient_request_id, source_request_id, shared); a pair matched on several nodes counts its most.
-- grain: recipient request, source request; reads: content_matches; params: none
CREATE OR REPLACE VIEW content_pairs AS
SELECT recipient_request_id, source_request_id, max(shared) AS shared
FROM content_matches WHERE content_match AND NOT checked GROUP BY ALL;

-- content_matches.csv: per response with possible sources, each candidate source whose text its
-- response echoes with enough evidence (content_match), with the matched spans as word offsets.
-- grain: recipient request, source request, node; reads: content_matches; params: none
SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id, node, shared,
    source_side, response_spans, source_spans
    FROM content_matches WHERE content_match AND NOT checked ORDER BY ALL

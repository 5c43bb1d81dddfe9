-- SGLang model gateway --log-json lines (sgl-model-gateway/src/middleware.rs, observability/events.rs):
-- a request logs "started processing request" and "finished processing request" (or "request failed
-- with client/server error") inside its http_request span, whose fields carry request_id, status_code
-- and latency (microseconds); DEBUG events in the span add prefill_url/decode_url, and the newer
-- request_stats event model and token counts. The event's own fields sit at the top level (flattened)
-- or under "fields" (the layout smg's docs show); the span's under "span" (and the stack under "spans").
-- Each request becomes one record, numbered by its first line; broken lines stay records of their own
-- (rejected with their reason), and so does a line of a request without its request_id (an export that
-- renamed or dropped the field: its request cannot be told apart); lines of no request (start-up,
-- workers) are counted by the caller.
-- grain: one row per line, with its request id; reads: gw_records; params: none
-- scratch: smg_lines
CREATE OR REPLACE TEMP TABLE smg_lines AS
SELECT row, parse_error, rec,
       coalesce(json_extract_string(rec, '$.span.request_id'), json_extract_string(rec, '$.fields.request_id'),
                json_extract_string(rec, '$.request_id'), json_extract_string(rec, '$.spans[-1].request_id'))
           AS request_id,
       -- a line of a request: inside its http_request span, or one of the request's own messages
       coalesce(json_extract_string(rec, '$.span.name') = 'http_request'
                OR json_extract_string(rec, '$.spans[-1].name') = 'http_request'
                OR coalesce(json_extract_string(rec, '$.message'), json_extract_string(rec, '$.fields.message'))
                   IN ('started processing request', 'finished processing request')
                OR starts_with(coalesce(json_extract_string(rec, '$.message'),
                                        json_extract_string(rec, '$.fields.message')), 'request failed'), false)
           AS in_request
FROM gw_records;

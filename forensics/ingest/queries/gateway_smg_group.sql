-- SGLang model gateway --log-json lines (sgl-model-gateway/src/middleware.rs, observability/events.rs):
-- a request logs "started processing request" and "finished processing request" (or "request failed
-- with client/server error") inside its http_request span, whose fields carry request_id, status_code
-- and latency (microseconds); DEBUG events in the span add prefill_url/decode_url, and the newer
-- request_stats event model and token counts. The event's own fields sit at the top level (flattened)
-- or under "fields" (the layout smg's docs show); the span's under "span" (and the stack under "spans").
-- Each request becomes one record, numbered by its first line; broken lines stay records of their own
-- (rejected with their reason); lines of no request (start-up, workers) are counted by the caller.
-- grain: one record per request id (and per broken line); reads: gw_records; params: none
CREATE OR REPLACE TEMP TABLE smg_lines AS
SELECT row, parse_error, rec,
       coalesce(json_extract_string(rec, '$.span.request_id'), json_extract_string(rec, '$.fields.request_id'),
                json_extract_string(rec, '$.request_id'), json_extract_string(rec, '$.spans[-1].request_id'))
           AS request_id
FROM gw_records;

CREATE OR REPLACE TEMP TABLE smg_requests AS
SELECT request_id, min(row) AS row, count(*) AS lines,
       json_object(
           'request_id', request_id,
           'timestamp', arg_min(json_extract_string(rec, '$.timestamp'), row),
           'status_code', coalesce(max(TRY_CAST(json_extract_string(rec, '$.span.status_code') AS INTEGER)),
                                   max(TRY_CAST(coalesce(json_extract_string(rec, '$.http_status_code'),
                                                         json_extract_string(rec, '$.fields.http_status_code')) AS INTEGER))),
           'latency', max(TRY_CAST(json_extract_string(rec, '$.span.latency') AS DOUBLE)),
           'method', any_value(json_extract_string(rec, '$.span.method')),
           'uri', any_value(json_extract_string(rec, '$.span.uri')),
           'model', any_value(coalesce(json_extract_string(rec, '$.model'), json_extract_string(rec, '$.fields.model'))),
           'prompt_tokens', any_value(coalesce(json_extract_string(rec, '$.prompt_tokens'),
                                               json_extract_string(rec, '$.fields.prompt_tokens'))),
           'completion_tokens', any_value(coalesce(json_extract_string(rec, '$.completion_tokens'),
                                                   json_extract_string(rec, '$.fields.completion_tokens'))),
           'prefill_url', any_value(coalesce(json_extract_string(rec, '$.prefill_url'),
                                             json_extract_string(rec, '$.fields.prefill_url'))),
           'decode_url', any_value(coalesce(json_extract_string(rec, '$.decode_url'),
                                            json_extract_string(rec, '$.fields.decode_url')))
       )::VARCHAR AS rec
FROM smg_lines WHERE parse_error IS NULL AND request_id IS NOT NULL
GROUP BY request_id;

CREATE OR REPLACE TEMP TABLE gw_records AS
SELECT row, NULL::VARCHAR AS parse_error, rec FROM smg_requests
UNION ALL SELECT row, parse_error, NULL FROM smg_lines WHERE parse_error IS NOT NULL
ORDER BY row;
DROP TABLE smg_lines;

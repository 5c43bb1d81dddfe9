-- Step 2 of gateway_smg_group: makes smg_requests: one record per request id from its lines
-- grain: one row per request id; reads: smg_lines; params: none
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

-- Type one staged gateway file (all text): gw_typed, a view (nothing is copied), holds each field's
-- typed value (NULL when it does not parse) next to its text. A Parquet file whose columns already have
-- the contract's types is typed by forensics.ingest.gateway instead, with the same columns.
-- engine_id, trace_id and attrs come from other formats than the spec's (forensics.gateway_formats).
-- grain: one row per client request; reads: gw_stage; params: none
CREATE OR REPLACE TEMP VIEW gw_typed AS
SELECT row, parse_error,
    CASE WHEN regexp_matches(ts, '(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$') THEN TRY_CAST(ts AS TIMESTAMPTZ) END AS ts_v, ts,
    nullif(request_id, '') AS request_id, nullif(account_id, '') AS account_id, api_token_id, client_ip,
    user_agent, model,
    CASE WHEN regexp_matches(status, '^\s*[0-9]{3}\s*$') THEN TRY_CAST(trim(status) AS INTEGER) END AS status_v, status,
    TRY_CAST(trim(prompt_tokens) AS BIGINT) AS prompt_v, prompt_tokens,
    TRY_CAST(trim(completion_tokens) AS BIGINT) AS completion_v, completion_tokens,
    TRY_CAST(trim(duration_ms) AS DOUBLE) AS duration_v, duration_ms,
    CASE WHEN regexp_matches(bootstrap_room, '^\s*[0-9]+\s*$') THEN TRY_CAST(trim(bootstrap_room) AS BIGINT) END AS room_v,
    bootstrap_room, nullif(prefill_node, '') AS prefill_node, nullif(decode_node, '') AS decode_node,
    CASE WHEN headers IS NULL OR trim(headers) IN ('', 'null') THEN NULL
         WHEN json_valid(headers) AND json_type(headers) = 'OBJECT' THEN CAST(headers AS JSON) END AS headers_v, headers,
    nullif(engine_id, '') AS engine_id, nullif(lower(trace_id), '') AS trace_id, CAST(attrs AS JSON) AS attrs
FROM gw_stage;

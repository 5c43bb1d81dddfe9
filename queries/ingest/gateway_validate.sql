-- Type one staged gateway file (all text) into `gateway`; rows that break the contract go to `rejected`.
-- gw_typed is a view: it is read twice (rejected rows, loaded rows), nothing is copied.
-- grain: one row per client request; reads: gw_stage; params: file_id
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
         WHEN json_valid(headers) AND json_type(headers) = 'OBJECT' THEN CAST(headers AS JSON) END AS headers_v, headers
FROM gw_stage;

INSERT INTO rejected
SELECT getvariable('file_id'), row, reason FROM (
    SELECT row, CASE
        WHEN parse_error IS NOT NULL THEN parse_error
        WHEN request_id IS NULL THEN 'request_id missing'
        WHEN ts_v IS NULL THEN 'ts missing or not an RFC 3339 timestamp with zone' || coalesce(': ' || left(ts, 60), '')
        WHEN account_id IS NULL THEN 'account_id missing'
        WHEN status_v IS NULL THEN 'status missing or not an HTTP status code' || coalesce(': ' || left(status, 40), '')
        WHEN prompt_tokens IS NOT NULL AND trim(prompt_tokens) <> '' AND prompt_v IS NULL
            THEN 'prompt_tokens not an integer: ' || left(prompt_tokens, 40)
        WHEN completion_tokens IS NOT NULL AND trim(completion_tokens) <> '' AND completion_v IS NULL
            THEN 'completion_tokens not an integer: ' || left(completion_tokens, 40)
        WHEN duration_ms IS NOT NULL AND trim(duration_ms) <> '' AND duration_v IS NULL
            THEN 'duration_ms not a number: ' || left(duration_ms, 40)
        WHEN bootstrap_room IS NOT NULL AND trim(bootstrap_room) <> '' AND room_v IS NULL
            THEN 'bootstrap_room not an integer in 0..2^63-1: ' || left(bootstrap_room, 40)
        WHEN headers IS NOT NULL AND trim(headers) NOT IN ('', 'null') AND headers_v IS NULL
            THEN 'headers not a JSON object'
    END AS reason FROM gw_typed)
WHERE reason IS NOT NULL;

INSERT INTO gateway
SELECT request_id, ts_v, account_id, api_token_id, client_ip, user_agent, model, status_v, prompt_v, completion_v,
       duration_v, room_v, prefill_node, decode_node, headers_v, getvariable('file_id'), row
FROM gw_typed t
WHERE NOT EXISTS (SELECT 1 FROM rejected r WHERE r.file_id = getvariable('file_id') AND r.row = t.row);

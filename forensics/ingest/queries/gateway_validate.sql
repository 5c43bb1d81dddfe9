-- Validate one typed gateway file (gw_typed): every row that breaks the contract goes to `rejected` with
-- its reason. The good rows are the others: forensics.ingest.gateway copies them from a text file, or
-- reads them in place from a Parquet file.
-- Other formats than the spec's (gw_strict false) may lack the account and the HTTP status: they are then
-- unknown, never made up; a status that is logged must still be a status code.
-- grain: one row per client request; reads: gw_typed; params: file_id, gw_strict
INSERT INTO rejected
SELECT $file_id, row, reason FROM (
    SELECT row, CASE
        WHEN parse_error IS NOT NULL THEN parse_error
        WHEN request_id IS NULL THEN 'request_id missing'
        WHEN ts_v IS NULL THEN 'ts missing or not an RFC 3339 timestamp with zone' || coalesce(': ' || left(ts, 60), '')
        WHEN account_id IS NULL AND $gw_strict THEN 'account_id missing'
        WHEN status_v IS NULL AND ($gw_strict OR status IS NOT NULL) THEN 'status missing or not an HTTP status code' || coalesce(': ' || left(status, 40), '')
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

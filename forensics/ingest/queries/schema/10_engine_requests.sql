-- Step 10 of schema: makes engine_requests.
-- grain: engine log line about one request (file_id, line; kind: which message); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_requests (
    node VARCHAR, rid VARCHAR, room BIGINT, kind VARCHAR, input_len BIGINT, output_len BIGINT,
    max_input_len BIGINT, detail VARCHAR, ts TIMESTAMPTZ, file_id INTEGER, line BIGINT,
    forward_s DOUBLE, start_time TIMESTAMPTZ,
    prealloc_s DOUBLE, transfer_s DOUBLE, queue_s DOUBLE, bootstrap_s DOUBLE, elapsed_s DOUBLE,
    forwarded_id VARCHAR);
-- forward_s, start_time: a Req Time Stats line's forward_duration (decode: its decode steps) and
-- start_time (when the request entered the node's scheduler, on the node's clock)
-- prealloc_s, transfer_s (decode), bootstrap_s (prefill), queue_s: its other stages, in seconds
-- elapsed_s: how long a kvpoll_timeout or deferred_release_timeout line waited before giving up
-- forwarded_id: the request id a gateway forwarded (x-request-id), where the request log records headers

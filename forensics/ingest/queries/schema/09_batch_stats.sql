-- Step 9 of schema: makes batch_stats, one row per SGLang periodic batch line (`Decode batch ...` every
-- --decode-log-interval decode steps, `Prefill batch ...` per prefill batch), NULL where the line's
-- release does not print the field (forensics.engines.sglang BATCH_FIELDS).
-- grain: periodic batch line of an engine log (file_id, line); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS batch_stats (
    node VARCHAR, file_id INTEGER, line BIGINT, ts TIMESTAMPTZ, kind VARCHAR, forward_ct BIGINT,
    running_req BIGINT, tokens_used BIGINT, token_usage DOUBLE, prealloc_usage DOUBLE, prealloc_req BIGINT,
    transfer_req BIGINT, retracted_req BIGINT, queue_req BIGINT, new_seq BIGINT, new_token BIGINT,
    cached_token BIGINT, pending_token BIGINT, bootstrap_req BIGINT, inflight_req BIGINT, throughput DOUBLE,
    graph BOOLEAN);

-- Step 17 of schema: makes engine_request_links.
-- grain: engine log line that names a request's KV transfer (file_id, line); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_request_links (
    node VARCHAR, file_id INTEGER, line BIGINT, rid VARCHAR, role VARCHAR, remote_engine VARCHAR,
    remote_rid VARCHAR, remote_host VARCHAR, remote_port BIGINT, remote_block_ids VARCHAR);
-- a vLLM request line's kv_transfer_params (forensics.engines.vllm.fields, docs/vllm-lines.md): role
-- decode (do_remote_prefill: it reads its KV from remote_engine) or prefill (do_remote_decode); the rest
-- as the proxy passed them, NULL where the line has none (remote_rid: vLLM 0.2x's remote_request_id)

-- The KV transfer a vLLM request line names (its kv_transfer_params, forensics.engines.vllm.fields): the
-- prefill engine, request, side channel and blocks a decode request reads, or a prefill's flags.
-- grain: engine log line that names a request's KV transfer (file_id, line); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_request_links (
    node VARCHAR, file_id INTEGER, line BIGINT, rid VARCHAR, role VARCHAR, remote_engine VARCHAR,
    remote_rid VARCHAR, remote_host VARCHAR, remote_port BIGINT, remote_block_ids VARCHAR);
-- role: decode (do_remote_prefill: it reads its KV from remote_engine) or prefill (do_remote_decode);
-- the rest as the proxy passed them, NULL where the line has none (remote_rid: remote_request_id, 0.2x)

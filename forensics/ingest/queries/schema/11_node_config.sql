-- Step 11 of schema: makes node_config, one row per node. pool_tokens is the node's pool by the pool
-- rule (forensics.engines.sglang.POOL_SOURCES, the macro sglang_rank_pool: forensics.ingest.engine.store);
-- full_layer_tokens, max_total_num_tokens and allocated_tokens are the node's first line of each of its
-- sources, as logged; engine is the engine its logs name (forensics.ingest.startup): 'sglang', or another
-- engine of the registry whose start-up facts alone are read.
-- grain: node; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS node_config (
    node VARCHAR, role VARCHAR, page_size BIGINT, context_len BIGINT, pool_tokens BIGINT,
    full_layer_tokens BIGINT, max_total_num_tokens BIGINT, allocated_tokens BIGINT, tp_size BIGINT,
    model_path VARCHAR, file_id INTEGER, line BIGINT, engine VARCHAR);

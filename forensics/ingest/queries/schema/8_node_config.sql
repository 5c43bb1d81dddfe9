-- Step 8 of schema: makes node_config.
-- grain: node_config; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS node_config (
    node VARCHAR, role VARCHAR, page_size BIGINT, context_len BIGINT, pool_tokens BIGINT,
    max_total_num_tokens BIGINT, tp_size BIGINT, model_path VARCHAR, file_id INTEGER, line BIGINT);

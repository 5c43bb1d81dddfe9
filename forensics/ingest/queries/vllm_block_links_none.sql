-- No vLLM decode line names a prefill's blocks: vllm_block_links, empty (vllm_block_links.sql makes it
-- otherwise), so that no page event is read for it.
-- grain: decode line linked to a room (none); reads: nothing; params: none
CREATE OR REPLACE TEMP TABLE vllm_block_links (node VARCHAR, file_id INTEGER, line BIGINT, rid VARCHAR, room BIGINT,
                                               sender VARCHAR)

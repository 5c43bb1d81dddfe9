-- Step 12 of schema: makes node_limits, each node's scheduler input limit from its start-up lines
-- (its first logged context length and its pool by the pool rule, node_config.pool_tokens; the macro
-- sglang_max_input: forensics.engines.sglang). The leak window of a prefill/decode pair is
-- [prefill max_in, decode max_in). SGLang's nodes only: the limit is SGLang's rule.
-- grain: node; reads: node_config; params: none
CREATE OR REPLACE VIEW node_limits AS
SELECT node, sglang_max_input(any_value(context_len ORDER BY line), any_value(pool_tokens ORDER BY line)) AS max_in
FROM node_config WHERE engine = 'sglang' GROUP BY node;

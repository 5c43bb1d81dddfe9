-- The engine release the nodes ran, as bundle.toml's [engine] version says (NULL: not said): one row.
-- It names the allocator's page-reuse policy when no decode node has page telemetry to learn it from.
-- grain: one row (the bundle's engine release); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_build (version VARCHAR);

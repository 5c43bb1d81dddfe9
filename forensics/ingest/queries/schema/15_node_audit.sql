-- Step 15 of schema: makes node_audit, the config audit's verdict on each node (forensics.audit over the
-- bundle's engine/<node>/ folders, run once by ingest: forensics.ingest.startup.store_audit), which the
-- report's root cause reads. A failed audit is one row without a node whose reason is the error.
-- grain: node; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS node_audit (
    node VARCHAR, verdict VARCHAR, reason VARCHAR, max_req_input_len BIGINT, evidence_lines VARCHAR[]);

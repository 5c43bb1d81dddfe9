-- The SGLang spans of OTLP trace files under gateway/ (forensics.gateway_formats.otlp): trace id -> rid and room,
-- for the join of gateway records without a room (ingest/queries/gateway_join/).
-- grain: one row per SGLang request span; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS engine_spans (
    trace_id VARCHAR, rid VARCHAR, room BIGINT, role VARCHAR, service VARCHAR, file_id INTEGER, line BIGINT);

-- gateway is a view (forensics.ingest.gateway.define_gateway), like page_events: these rows from text
-- files, and the valid rows of Parquet files with the contract's column types read in place.
-- engine_id, trace_id, attrs: what other formats than the spec's carry (docs/gateway-formats.md): the id
-- the engines know the request by, its W3C trace id, and the tenant-layer attributes (team, key alias,
-- tags, ... and the format's name).
-- grain: gateway record copied in, from a file not read in place (file_id, row); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS gateway_text (
    request_id VARCHAR, ts TIMESTAMPTZ, account_id VARCHAR, api_token_id VARCHAR, client_ip VARCHAR,
    user_agent VARCHAR, model VARCHAR, status INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT,
    duration_ms DOUBLE, bootstrap_room BIGINT, prefill_node VARCHAR, decode_node VARCHAR, headers JSON,
    engine_id VARCHAR, trace_id VARCHAR, attrs JSON, file_id INTEGER, row BIGINT);

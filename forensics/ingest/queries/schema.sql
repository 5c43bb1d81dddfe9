-- Tables every later stage reads. One row per loaded input row; file_id + row point back to the evidence.
-- grain: see each table; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS files (
    file_id INTEGER PRIMARY KEY, source VARCHAR, path VARCHAR, node VARCHAR, sha256 VARCHAR, bytes BIGINT,
    rows_read BIGINT, rows_loaded BIGINT, rows_rejected BIGINT, error VARCHAR, rows_outside_window BIGINT,
    skipped VARCHAR);
-- The historical replay window (--since/--until; NULL = open end): one row.
CREATE TABLE IF NOT EXISTS replay_window (since TIMESTAMPTZ, "until" TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS rejected (file_id INTEGER, row BIGINT, reason VARCHAR);
-- page_events is a view (forensics.ingest.pages.define_page_events): these rows from text files, and the
-- valid rows of each Parquet file read where it lies.
CREATE TABLE IF NOT EXISTS page_events_text (
    node VARCHAR, seq BIGINT, ts TIMESTAMPTZ, op VARCHAR, room BIGINT, start BIGINT, "end" BIGINT,
    peer VARCHAR, src VARCHAR, file_id INTEGER, row BIGINT);
-- gateway is a view (forensics.ingest.gateway.define_gateway), like page_events: these rows from text
-- files, and the valid rows of Parquet files with the contract's column types read in place.
CREATE TABLE IF NOT EXISTS gateway_text (
    request_id VARCHAR, ts TIMESTAMPTZ, account_id VARCHAR, api_token_id VARCHAR, client_ip VARCHAR,
    user_agent VARCHAR, model VARCHAR, status INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT,
    duration_ms DOUBLE, bootstrap_room BIGINT, prefill_node VARCHAR, decode_node VARCHAR, headers JSON,
    file_id INTEGER, row BIGINT);
CREATE TABLE IF NOT EXISTS engine_lines (
    node VARCHAR, file_id INTEGER, line BIGINT, ts TIMESTAMPTZ, ts_resolution_ms INTEGER, rank VARCHAR,
    kind VARCHAR, message VARCHAR);
CREATE TABLE IF NOT EXISTS engine_requests (
    node VARCHAR, rid VARCHAR, room BIGINT, kind VARCHAR, input_len BIGINT, output_len BIGINT,
    max_input_len BIGINT, detail VARCHAR, ts TIMESTAMPTZ, file_id INTEGER, line BIGINT);
CREATE TABLE IF NOT EXISTS node_config (
    node VARCHAR, role VARCHAR, page_size BIGINT, context_len BIGINT, pool_tokens BIGINT,
    max_total_num_tokens BIGINT, tp_size BIGINT, model_path VARCHAR, file_id INTEGER, line BIGINT);

-- Step 17 of schema: makes integrity_events, one row per integrity line an engine or its transfer
-- library wrote (a KV canary violation, a transfer checksum mismatch, a NIXL transfer failure or KV
-- expiry, a Mooncake slice failure: forensics.engines.integrity KINDS), with the room or request, the
-- slot, position or blocks where the line names them; ts NULL where the line prints no full date.
-- grain: integrity line of an engine log (file_id, line); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS integrity_events (
    node VARCHAR, ts TIMESTAMPTZ, kind VARCHAR, reason VARCHAR, room BIGINT, request_id VARCHAR,
    remote_request_id VARCHAR, slot BIGINT, position BIGINT, stored_token BIGINT, expected_token BIGINT,
    block_ids BIGINT[], num_blocks BIGINT, address VARCHAR, file_id INTEGER, line BIGINT, message VARCHAR);

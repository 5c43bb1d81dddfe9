-- First pass: no foreign write injected yet.
-- grain: node, holder, k, start (none yet); reads: nothing; params: none
CREATE OR REPLACE TABLE room_injected (node VARCHAR, holder BIGINT, room BIGINT, k BIGINT, kg BIGINT, pos BIGINT,
    start BIGINT, "end" BIGINT, ambiguous BOOLEAN, ts TIMESTAMPTZ, ts_hi TIMESTAMPTZ, op VARCHAR);

-- Step 4 of history_search: makes history_found.
-- grain: item, s (none yet: the rounds fill it); reads: nothing; params: none
CREATE OR REPLACE TABLE history_found (item BIGINT, s BIGINT, e BIGINT, w_room BIGINT, w_k BIGINT,
    w_amb BOOLEAN, w_ts TIMESTAMPTZ);

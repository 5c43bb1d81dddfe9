-- Step 3 of schema: makes rejected.
-- grain: rejected input row (file_id, row) with its reason; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS rejected (file_id INTEGER, row BIGINT, reason VARCHAR);

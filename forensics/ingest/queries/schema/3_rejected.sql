-- Step 3 of schema: makes rejected.
-- grain: rejected; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS rejected (file_id INTEGER, row BIGINT, reason VARCHAR);

-- The historical replay window (--since/--until; NULL = open end): one row.
-- grain: one row (the run's replay window); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS replay_window (since TIMESTAMPTZ, "until" TIMESTAMPTZ);

-- Tables every later stage reads. One row per loaded input row; file_id + row point back to the evidence.
-- grain: input file; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS files (
    file_id INTEGER PRIMARY KEY, source VARCHAR, path VARCHAR, node VARCHAR, sha256 VARCHAR, bytes BIGINT,
    rows_read BIGINT, rows_loaded BIGINT, rows_rejected BIGINT, error VARCHAR, rows_outside_window BIGINT,
    skipped VARCHAR);

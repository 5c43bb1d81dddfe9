-- page_events is a view (forensics.ingest.pages.define_page_events): these rows from text files, and the
-- valid rows of each Parquet file read where it lies.
-- grain: page event read from a text file (file_id, row); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS page_events_text (
    node VARCHAR, seq BIGINT, ts TIMESTAMPTZ, op VARCHAR, room BIGINT, start BIGINT, "end" BIGINT,
    peer VARCHAR, src VARCHAR, file_id INTEGER, row BIGINT);

-- The fingerprints of the prompt and response text a gateway record holds (forensics.ingest.content):
-- 64-bit hashes of its 4-word shingles with each one's word offset in its text; never the text.
-- grain: one row per fingerprint of a record's prompt or response; reads: nothing; params: none
CREATE TABLE IF NOT EXISTS content_fingerprints (
    file_id INTEGER, row BIGINT, side VARCHAR, pos INTEGER, h BIGINT);

-- What each input file lost, as the loader that read it found it (forensics.ingest.damage): a file
-- skipped whole, a stream cut short, a page file cut or unreadable; the findings' evidence_damage
-- reads it beside the tables.
-- grain: loss of an input file (file_id, kind); reads: nothing; params: none
CREATE TABLE IF NOT EXISTS input_damage (
    file_id INTEGER, kind VARCHAR, detail VARCHAR, records_lost BIGINT, lost_basis VARCHAR, at_byte BIGINT,
    bytes_after BIGINT, bytes_read BIGINT, records_read BIGINT);

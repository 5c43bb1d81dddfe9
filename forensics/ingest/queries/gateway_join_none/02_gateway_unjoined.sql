-- No gateway record lacks its room: the join's tables, empty (gateway_join/ makes them otherwise).
-- grain: gateway record left without a room (none); reads: nothing; params: none
CREATE OR REPLACE TABLE gateway_unjoined (file_id INTEGER, row BIGINT, request_id VARCHAR, rooms BIGINT,
                                          candidates BIGINT, reason VARCHAR)

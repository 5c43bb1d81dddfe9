-- No gateway record lacks its room: the join's tables, empty (gateway_join/ makes them otherwise).
-- grain: open room and a record it may be (none); reads: nothing; params: none
CREATE OR REPLACE TABLE room_candidates (room BIGINT, node VARCHAR, request_id VARCHAR, account_id VARCHAR,
                                         basis VARCHAR, candidates BIGINT)

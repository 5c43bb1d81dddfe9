-- No gateway record lacks its room: the join's tables, empty (gateway_join/ makes them otherwise).
-- grain: gateway record joined to a room (none); reads: nothing; params: none
CREATE OR REPLACE TABLE gateway_joined (file_id INTEGER, row BIGINT, room BIGINT, prefill_node VARCHAR,
                                        decode_node VARCHAR, how VARCHAR)

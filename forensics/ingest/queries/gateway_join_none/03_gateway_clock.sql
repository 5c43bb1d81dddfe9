-- No gateway record lacks its room: the join's tables, empty (gateway_join/ makes them otherwise).
-- grain: node's clock bounds against the gateway (none); reads: nothing; params: none
CREATE OR REPLACE TABLE gateway_clock (node VARCHAR, rooms BIGINT, lo_us BIGINT, hi_us BIGINT, consistent BOOLEAN)

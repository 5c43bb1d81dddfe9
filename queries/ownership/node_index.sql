-- A key offset per node (idx * 2^40), so that (node, event rank) pairs order as one BIGINT and range
-- joins need no equality on node (DuckDB then uses its inequality join).
-- grain: node; reads: page_events, transfer_links; params: none
CREATE OR REPLACE TABLE node_index AS
SELECT node, (row_number() OVER (ORDER BY node))::BIGINT * 1099511627776 AS base
FROM (SELECT DISTINCT node FROM page_events UNION SELECT DISTINCT peer FROM page_events WHERE peer IS NOT NULL);

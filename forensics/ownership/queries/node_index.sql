-- A key offset per node (idx * 2^40), so that (node, event rank) pairs order as one BIGINT and range
-- joins need no equality on node (DuckDB then uses its inequality join).
-- Nodes: those that logged events (telemetry_nodes, made from page_events) and every peer a transfer names.
-- grain: node; reads: telemetry_nodes, page_events; params: none
CREATE OR REPLACE TABLE node_index AS
SELECT node, node_base((row_number() OVER (ORDER BY node))::BIGINT) AS base
FROM (SELECT node FROM telemetry_nodes UNION SELECT DISTINCT peer FROM page_events WHERE peer IS NOT NULL);

-- Nodes that logged page events, with their seq range; and the seq gaps (lost events) within each.
-- grain: node; reads: page_events; params: none
CREATE OR REPLACE TABLE telemetry_nodes AS
SELECT node, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS events
FROM page_events GROUP BY node;

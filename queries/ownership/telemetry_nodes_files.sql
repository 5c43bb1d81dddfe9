-- telemetry_nodes.sql without a pass over the events: the per-file figures ingest's screen already
-- took (page_file_stats, page_events_clean.sql), added up per node. forensics.ownership uses it only
-- when page_events holds every staged row of every page file (nothing rejected, unreadable or outside
-- the replay window); otherwise telemetry_nodes.sql reads the events.
-- grain: node; reads: page_file_stats; params: none
CREATE OR REPLACE TABLE telemetry_nodes AS
SELECT node, min(first_seq) AS first_seq, max(last_seq) AS last_seq, sum(events)::BIGINT AS events,
       min(first_ts) AS first_ts, max(last_ts) AS last_ts, min(own_first_seq) AS own_first_seq,
       max(own_last_seq) AS own_last_seq
FROM page_file_stats GROUP BY node;

-- Telemetry coverage per node, as in coverage.csv.
-- grain: node; reads: coverage; params: none
SELECT node, role, page_telemetry, seq_gaps, events_lost, responses_served, responses_verified, page_events
FROM coverage ORDER BY node;

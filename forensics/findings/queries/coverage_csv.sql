-- coverage.csv (spec section 6): per node, what the evidence covers.
-- grain: node; reads: coverage; params: none
SELECT node, role, page_telemetry, seq_gaps, responses_served, responses_verified,
    events_lost, page_events FROM coverage ORDER BY node

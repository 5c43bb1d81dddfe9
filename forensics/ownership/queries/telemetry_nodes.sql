-- Nodes that logged page events, with their seq range (of all events, and of their own: all but the
-- transfers they sent), the stamps of their first and last event, and the highest slot end of their own
-- events (the screen sizes its run map by it, with the transfers landed in the node: timeline_keys).
-- grain: node; reads: page_events; params: none
CREATE OR REPLACE TABLE telemetry_nodes AS
SELECT node, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS events, min(ts) AS first_ts, max(ts) AS last_ts,
       min(seq) FILTER (WHERE op <> 'transfer') AS own_first_seq, max(seq) FILTER (WHERE op <> 'transfer') AS own_last_seq,
       max("end") FILTER (WHERE op <> 'transfer') AS own_max_end
FROM page_events GROUP BY node;

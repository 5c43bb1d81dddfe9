-- The page files holding the events of each node whose page events show a loss (a seq gap, a page-event
-- outage): the damage lies in one of them, so damage_seq_gaps and damage_outages name them as the input.
-- grain: node; reads: page_events, files, seq_gaps, log_outages; params: none
CREATE OR REPLACE TEMP TABLE damage_node_files AS
SELECT p.node, string_agg(DISTINCT f.path, ', ' ORDER BY f.path) AS paths
FROM (SELECT DISTINCT node, file_id FROM page_events
      WHERE node IN (SELECT node FROM seq_gaps WHERE kind = 'lost'
                     UNION SELECT node FROM log_outages WHERE source = 'pages')) p
JOIN files f USING (file_id)
GROUP BY p.node;

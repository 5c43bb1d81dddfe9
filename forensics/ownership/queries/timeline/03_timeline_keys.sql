-- Step 3 of timeline: makes timeline_keys.
-- grain: node; reads: telemetry_nodes, timeline_xfer, node_index; params: none
CREATE OR REPLACE TABLE timeline_keys AS
WITH spans AS (
    SELECT node, own_pos(own_first_seq) AS lo_pos, own_pos(own_last_seq) AS hi_pos, 0 AS max_sub, own_max_end AS max_end
    FROM telemetry_nodes WHERE own_first_seq IS NOT NULL
    UNION ALL
    SELECT node, min(pos), max(pos), max(sub), max("end") FROM timeline_xfer GROUP BY node
)
SELECT s.node, any_value(x.base) AS base, min(s.lo_pos) AS lo_pos, max(s.max_sub) + 1 AS stride,
       ((max(s.hi_pos) - min(s.lo_pos) + 1)::HUGEINT * (max(s.max_sub) + 1) + 1) < node_end(0) AS fits,
       max(s.max_end) AS max_end
FROM spans s JOIN node_index x USING (node) GROUP BY s.node;

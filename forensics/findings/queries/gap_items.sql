-- The lost seq gaps of the nodes with page telemetry, numbered (item) in node and seq order, with the
-- end of the node's own pool: forensics.findings.gap_sources finds the holders before each.
-- grain: lost seq gap; reads: seq_gaps, telemetry_nodes; params: none
SELECT row_number() OVER (ORDER BY g.node, g.prev_seq) - 1 AS item, g.node, g.prev_seq,
    coalesce(t.own_max_end, 0) AS pool_end
FROM seq_gaps g JOIN telemetry_nodes t USING (node) WHERE g.kind = 'lost' ORDER BY item;

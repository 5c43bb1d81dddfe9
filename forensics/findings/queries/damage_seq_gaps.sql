-- Evidence damage: page events lost in a node's seq gaps (the seq numbers count them), with the time
-- range between the events on either side of its gaps. The input is the page file(s) holding the
-- node's events (the damage lies in one of them), else the node.
-- grain: node with lost page events; reads: seq_gaps, damage_node_files; params: none
SELECT coalesce(h.paths, g.node) AS input, 'pages' AS source, g.node, 'seq_gap' AS kind,
       format('{:,} page events of {} lost in {:,} seq gap(s) ({}); reads on this node after a gap cannot be '
              || 'proven from its page events', sum(g.missing)::BIGINT, g.node, count(*),
              string_agg(format('seqs {}-{}', g.prev_seq + 1, g.next_seq - 1), ', ' ORDER BY g.prev_seq)) AS detail,
       sum(g.missing)::BIGINT AS records_lost, 'counted' AS lost_basis, min(g.prev_ts) AS time_from,
       max(g.next_ts) AS time_to
FROM seq_gaps g LEFT JOIN damage_node_files h USING (node)
WHERE g.kind = 'lost' GROUP BY g.node, h.paths

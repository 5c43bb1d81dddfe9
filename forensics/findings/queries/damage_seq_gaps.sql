-- Evidence damage: page events lost in a node's seq gaps (the seq numbers count them), with the time
-- range between the events on either side of its gaps.
-- grain: node with lost page events; reads: seq_gaps; params: none
SELECT node AS input, 'pages' AS source, node, 'seq_gap' AS kind,
       format('{:,} page events lost in {:,} seq gap(s) ({}); reads on this node after a gap cannot be proven '
              || 'from its page events', sum(missing)::BIGINT, count(*),
              string_agg(format('seqs {}-{}', prev_seq + 1, next_seq - 1), ', ' ORDER BY prev_seq)) AS detail,
       sum(missing)::BIGINT AS records_lost, 'counted' AS lost_basis, min(prev_ts) AS time_from, max(next_ts) AS time_to
FROM seq_gaps WHERE kind = 'lost' GROUP BY node

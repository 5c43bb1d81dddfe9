-- Evidence damage: page events lost in a node's seq gaps (the seq numbers count them), with the time
-- range between the events on either side of its gaps. The input is the node's page file(s) (a page
-- file names its node by its path: a path segment), else the node where no file's path names it.
-- grain: node with lost page events; reads: seq_gaps, files; params: none
SELECT coalesce((SELECT string_agg(f.path, ', ' ORDER BY f.path) FROM files f
                 WHERE f.source = 'pages'
                   AND (f.node = g.node OR list_contains(string_split_regex(f.path, '[/.=]'), g.node))),
                g.node) AS input,
       'pages' AS source, g.node, 'seq_gap' AS kind,
       format('{:,} page events of {} lost in {:,} seq gap(s) ({}); reads on this node after a gap cannot be '
              || 'proven from its page events', sum(missing)::BIGINT, g.node, count(*),
              string_agg(format('seqs {}-{}', prev_seq + 1, next_seq - 1), ', ' ORDER BY prev_seq)) AS detail,
       sum(missing)::BIGINT AS records_lost, 'counted' AS lost_basis, min(prev_ts) AS time_from, max(next_ts) AS time_to
FROM seq_gaps g WHERE kind = 'lost' GROUP BY g.node

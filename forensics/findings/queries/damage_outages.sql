-- Evidence damage: outages of a node's logs (log_outages): a time in which the gateway routed served
-- requests to the node that its evidence never names, while it logged nothing. The input is the node's
-- engine log folder, or the page file(s) holding its events for an outage of its page events.
-- The lines lost are unknown (a silent log says nothing of how much it did not write): records_lost is
-- unknown, and the detail counts the requests routed there that the node never names.
-- grain: node, source, gap_from; reads: log_outages, damage_node_files; params: none
SELECT CASE WHEN o.source = 'pages' THEN coalesce(h.paths, o.node) ELSE 'engine/' || o.node END AS input,
       o.source, o.node, 'log_outage' AS kind,
       format('{} {} has no line from {} to {} while the gateway routed it {:,} served request(s) it never names '
              || '({}); responses served there are indeterminate, never cleared',
              o.node, CASE WHEN o.source = 'pages' THEN 'page events' ELSE 'engine log' END,
              strftime(o.gap_from AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'),
              strftime(o.gap_to AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), o.requests_in_gap, o.basis) AS detail,
       NULL::BIGINT AS records_lost, 'unknown' AS lost_basis, o.gap_from AS time_from, o.gap_to AS time_to
FROM log_outages o LEFT JOIN damage_node_files h USING (node)

-- The reads of the affected responses (a confirmed one too: its own transfer logged, the stale slots it
-- read may hold another room's unlogged transfer rather than the proven writer's KV) on receivers a
-- silent or lossy sender fed, with global keys (node base + position): the last proven write (or the
-- node's start) and the read. forensics.findings.sender_sources sweeps them against sender_held.sql.
-- grain: read_provenance segment of a recipient room on such a receiver; reads: transfer_links, node_config,
--        gateway, telemetry_nodes, seq_gaps, page_events, affected_responses, room_requests, read_provenance,
--        node_index; params: none
WITH blind AS (  -- receivers whose senders may have lost transfers: a prefill node kept no
                           -- page records (every receiver), or a sender to it lost events
    SELECT DISTINCT receiver AS node FROM transfer_links
    WHERE EXISTS (SELECT node FROM node_config WHERE role = 'prefill'
                  UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
                  EXCEPT SELECT node FROM telemetry_nodes)
       OR sender IN (SELECT node FROM seq_gaps WHERE kind = 'lost')
    UNION
    SELECT DISTINCT node FROM page_events WHERE op = 'read' AND EXISTS (
        SELECT node FROM node_config WHERE role = 'prefill'
        UNION SELECT prefill_node FROM gateway WHERE prefill_node IS NOT NULL
        EXCEPT SELECT node FROM telemetry_nodes)
), recipient AS (
    SELECT DISTINCT r.node, r.room FROM affected_responses a JOIN room_requests r ON r.request_id = a.request_id
    WHERE a.evidence = 'pages'
    UNION
    SELECT DISTINCT decode_node, room FROM affected_responses WHERE evidence = 'pages' AND room IS NOT NULL
)
SELECT p.node, p.room, p.seg_start, p.seg_end, x.base + coalesce(p.w_pos, -1) AS gw, x.base + p.pos AS gp
FROM read_provenance p JOIN node_index x USING (node)
WHERE p.node IN (SELECT node FROM blind) AND (p.node, p.room) IN (SELECT (node, room) FROM recipient)
  AND p.seg_end > p.seg_start
ORDER BY p.node, p.room, p.pos, p.seg_start;

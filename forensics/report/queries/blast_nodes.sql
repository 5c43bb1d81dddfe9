-- Blast radius per node: affected responses it served (by status) and exposure pairs read there, with
-- their sources (a source of unknown request counted by its room: source_key).
-- grain: node; reads: coverage, report_affected, exposures; params: none
WITH recv AS (
    SELECT node, count(DISTINCT request_id) AS affected,
           count(DISTINCT request_id) FILTER (WHERE status = 'confirmed') AS confirmed,
           count(DISTINCT request_id) FILTER (WHERE status = 'indeterminate') AS indeterminate,
           count(DISTINCT request_id) FILTER (WHERE evidence = 'signature') AS signature,
           count(DISTINCT request_id) FILTER (WHERE cohort = 'customer') AS customer,
           min(affected_at) AS first_affected_at, max(affected_at) AS last_affected_at
    FROM report_affected GROUP BY node
), pairs AS (
    SELECT node, count(*) AS pairs, count(DISTINCT source_key(source_request_id, source_room)) AS sources
    FROM exposures GROUP BY node
), nodes AS (SELECT node FROM coverage UNION SELECT node FROM recv UNION SELECT node FROM pairs)
SELECT node, coalesce(c.role, 'unknown') AS role, coalesce(c.page_telemetry, 'no') AS page_telemetry,
       coalesce(affected, 0) AS affected, coalesce(confirmed, 0) AS confirmed,
       coalesce(indeterminate, 0) AS indeterminate, coalesce(signature, 0) AS signature,
       coalesce(customer, 0) AS customer, coalesce(pairs, 0) AS pairs, coalesce(sources, 0) AS sources,
       first_affected_at, last_affected_at
FROM nodes LEFT JOIN coverage c USING (node) LEFT JOIN recv USING (node) LEFT JOIN pairs USING (node)
ORDER BY node;

-- Per printed response: how many provenance ranges, how many distinct sources (a request, or a room
-- no gateway request names), and whether any source belongs to another account (or to none known).
-- grain: request_id; reads: prov_merged, report_prov; params: none
SELECT m.request_id, count(*) AS ranges,
       count(DISTINCT coalesce(nullif(m.source_request_id, ''), 'room ' || m.source_room)) AS sources,
       bool_or(m.source_account_id IS DISTINCT FROM r.account_id) AS cross_account
FROM prov_merged m JOIN (SELECT DISTINCT request_id, account_id FROM report_prov) r USING (request_id)
GROUP BY m.request_id ORDER BY m.request_id;

-- The responses whose provenance is printed (see prov_recipients), one row each, earliest first.
-- grain: request_id; reads: report_prov; params: none
SELECT DISTINCT request_id, account_id, cohort, http_status, completion_tokens, kinds, exposed_slots, first_exposed_at
FROM report_prov ORDER BY first_exposed_at, request_id;

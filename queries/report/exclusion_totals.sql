-- Totals before and after exclusion: all requests and affected responses vs the customer cohort only.
-- Sources are never excluded: their count is whatever cohort received the data.
-- grain: one row; reads: request_cohort, report_affected, exposures; params: none
SELECT (SELECT count(*) FROM request_cohort) AS requests_before,
       (SELECT count(*) FROM request_cohort WHERE cohort = 'customer') AS requests_after,
       (SELECT count(*) FROM report_affected) AS affected_before,
       (SELECT count(*) FROM report_affected WHERE cohort = 'customer') AS affected_after,
       (SELECT count(*) FROM report_affected WHERE status = 'confirmed') AS confirmed_before,
       (SELECT count(*) FROM report_affected WHERE status = 'confirmed' AND cohort = 'customer') AS confirmed_after,
       (SELECT count(DISTINCT account_id) FROM report_affected) AS accounts_before,
       (SELECT count(DISTINCT account_id) FROM report_affected WHERE cohort = 'customer') AS accounts_after,
       (SELECT count(DISTINCT source_request_id) FROM exposures WHERE source_request_id <> '') AS sources,
       (SELECT count(DISTINCT source_request_id) FROM exposures
         WHERE source_request_id <> '' AND coalesce(source_cohort, 'customer') = 'customer') AS customer_sources,
       (SELECT count(DISTINCT source_account_id) FROM exposures
         WHERE source_request_id <> '' AND coalesce(source_cohort, 'customer') = 'customer') AS customer_source_accounts;

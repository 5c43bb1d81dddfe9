-- Step 3 of gateway_smg_group: makes gw_records: the requests and the broken lines
-- grain: one record per request (and per broken line); reads: smg_requests, smg_lines; params: none
CREATE OR REPLACE TEMP TABLE gw_records AS
SELECT row, NULL::VARCHAR AS parse_error, rec FROM smg_requests
UNION ALL SELECT row, parse_error, NULL FROM smg_lines WHERE parse_error IS NOT NULL
ORDER BY row;

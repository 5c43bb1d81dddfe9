-- Step 3 of gateway_smg_group: makes gw_records: the requests, the broken lines and the request lines without
-- a request_id
-- grain: one record per request (and per broken or unnamed request line); reads: smg_requests, smg_lines; params: none
CREATE OR REPLACE TEMP TABLE gw_records AS
SELECT row, NULL::VARCHAR AS parse_error, rec FROM smg_requests
UNION ALL SELECT row, parse_error, NULL FROM smg_lines WHERE parse_error IS NOT NULL
UNION ALL SELECT row, 'no request_id: a line of a request (its http_request span) names no request_id, so '
                      || 'its request cannot be told apart from the others', NULL
FROM smg_lines WHERE parse_error IS NULL AND request_id IS NULL AND in_request
ORDER BY row;

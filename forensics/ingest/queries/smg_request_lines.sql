-- SMG's requests by their 'started processing request' lines, and the field names of a line of a
-- request (where a renamed request_id is looked for): forensics.ingest.other_formats checks them before
-- grouping the lines (gateway_smg_group).
-- grain: one row for the file (its requests and field names); reads: gw_records; params: none
SELECT count(*) FILTER (WHERE json_extract_string(rec, '$.message') = 'started processing request'),
       list_distinct(flatten(list(coalesce(json_keys(rec, '$.span'), []) || coalesce(json_keys(rec, '$.fields'), [])
                                  || json_keys(rec)) FILTER (WHERE json_extract_string(rec, '$.span.name')
                                                                    = 'http_request')))
FROM gw_records WHERE parse_error IS NULL

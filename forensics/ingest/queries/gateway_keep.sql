-- The good rows of a text-staged gateway file of any format (gw_typed less the rows gateway_validate
-- rejected), copied into gateway_text under file $file_id.
-- grain: gateway record of a text-staged file; reads: gw_typed, rejected; params: $file_id
INSERT INTO gateway_text
SELECT request_id, ts_v, account_id, api_token_id, client_ip, user_agent, model, status_v, prompt_v,
       completion_v, duration_v, room_v, prefill_node, decode_node, headers_v, engine_id, trace_id, attrs, $file_id, row
FROM gw_typed WHERE row NOT IN (SELECT row FROM rejected WHERE file_id = $file_id AND row IS NOT NULL)

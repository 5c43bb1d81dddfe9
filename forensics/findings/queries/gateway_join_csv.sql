-- gateway_join.csv: every gateway record without bootstrap_room that its ids did not join to an engine
-- request log (ingest/queries/gateway_join/), with the file (relative to the bundle) and the row: joined
-- by time (basis 'time+length' or 'time', its room, candidates 1), assigned (basis 'assigned': its room has
-- no other open record it can be, forensics/ingest/gateway_assign.py) or not joined (basis and room empty,
-- candidates: how many engine requests agree with it, empty where its ids name several rooms; reason:
-- why). A record not joined stays in the analysis as a request whose room is unknown; it is never dropped.
-- grain: file, row; reads: gateway_unjoined, gateway_joined, gateway, files; params: none
SELECT f.path AS file, x.row, x.request_id, x.basis, x.room, x.candidates, x.reason
FROM (
    SELECT file_id, row, request_id, NULL AS basis, NULL::BIGINT AS room, candidates, reason FROM gateway_unjoined
    UNION ALL
    SELECT j.file_id, j.row, g.request_id, j.how, j.room, 1,
           'one engine request agrees with its model and time window'
           || CASE WHEN j.how = 'time+length' THEN ' and prompt length' ELSE ' (no prompt length to compare)' END
           || ': room ' || j.room || coalesce(' on ' || nullif(concat_ws(' and ', j.prefill_node, j.decode_node), ''), '')
    FROM gateway_joined j JOIN gateway g USING (file_id, row) WHERE j.how IN ('time+length', 'time')
    UNION ALL
    SELECT j.file_id, j.row, g.request_id, j.how, j.room, NULL,
           'assigned as a whole: room ' || j.room || coalesce(' on ' || nullif(concat_ws(' and ', j.prefill_node,
           j.decode_node), ''), '') || ' agrees with no other open record, once the rooms other records are '
           || 'forced to are taken (the gateway log names every request the engines served)'
    FROM gateway_joined j JOIN gateway g USING (file_id, row) WHERE j.how = 'assigned'
) x JOIN files f USING (file_id)
ORDER BY f.path, x.row

-- Step 2 of gateway_join: makes join_hits
-- grain: one row per gateway record without a room, with the rooms its ids name; reads: gateway, engine_keys; params: none
CREATE OR REPLACE TEMP TABLE join_hits AS
WITH pending AS (
    SELECT file_id, row, request_id, engine_id, trace_id FROM gateway WHERE bootstrap_room IS NULL
), hits AS (
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = p.request_id
    UNION ALL
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = p.engine_id
    UNION ALL
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = 'trace:' || p.trace_id
)
SELECT p.file_id, p.row, p.request_id, p.engine_id, p.trace_id,
       count(DISTINCT h.room) AS rooms, min(h.room) AS room,
       string_agg(DISTINCT h.room::VARCHAR, ', ' ORDER BY h.room::VARCHAR) AS room_list,
       string_agg(DISTINCT h.how, '; ' ORDER BY h.how) AS how
FROM pending p LEFT JOIN hits h USING (file_id, row)
GROUP BY ALL;

-- Step 4 of gateway_join: makes gateway_unjoined: the records whose ids name no room or several, with the reason
-- (rooms, how many they name, is what code tests; reason is for people)
-- grain: one row per record not joined; reads: join_hits; params: none
CREATE OR REPLACE TABLE gateway_unjoined AS
SELECT file_id, row, request_id, rooms,
       CASE WHEN rooms = 0 THEN 'no engine request log names request id ' || request_id
                                 || coalesce(' or engine id ' || engine_id, '') || coalesce(' or trace ' || trace_id, '')
            ELSE 'its ids name ' || rooms || ' rooms in the engine logs (' || room_list || '), by ' || how
                 || ': which one served it is not in the evidence' END AS reason
FROM join_hits WHERE rooms <> 1
ORDER BY file_id, row;

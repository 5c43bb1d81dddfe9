-- Step 2 of gateway_join_end: makes gateway_unjoined: the records joined neither by their ids nor by time,
-- with the reason (rooms, how many rooms their ids name, and candidates, how many engine requests the time
-- join found for them, are what code tests; reason is for people). candidates: empty where the ids name
-- several rooms (the time join is not tried); 0, none agrees; 1, a single one that another record may be
-- too, or that no node's clock bound places in time; 2 or more, several (which one it was is not in the
-- evidence: none is confirmed). One that another record may be: it agrees in time, and near in length,
-- with another record (time_hits.length_near).
-- grain: one row per record not joined; reads: join_hits, time_hits, gateway_joined, gateway; params: none
CREATE OR REPLACE TABLE gateway_unjoined AS
WITH cand AS (
    SELECT file_id, row, count(*) AS candidates,
           string_agg(room::VARCHAR, ', ' ORDER BY room) FILTER (WHERE k <= 10) AS shown,
           CASE WHEN bool_or(length_used) THEN 'model, time window and prompt length'
                ELSE 'model and time window (no prompt length to compare)' END AS by
    FROM (SELECT *, row_number() OVER (PARTITION BY file_id, row ORDER BY room) AS k FROM time_hits WHERE length_ok)
    GROUP BY file_id, row
), others AS (  -- for a single candidate: how many other records agree with it in time and near in length
    SELECT h.file_id, h.row, (SELECT count(*) FROM time_hits o WHERE o.room = h.room AND o.length_near) - 1 AS n
    FROM time_hits h SEMI JOIN cand c ON c.file_id = h.file_id AND c.row = h.row AND c.candidates = 1
    WHERE h.length_ok
)
SELECT j.file_id, j.row, j.request_id, j.rooms,
       CASE WHEN j.rooms = 0 THEN coalesce(c.candidates, 0) END AS candidates,
       CASE WHEN j.rooms = 0 THEN 'no engine request log names request id ' || j.request_id
                                 || coalesce(' or engine id ' || j.engine_id, '') || coalesce(' or trace ' || j.trace_id, '')
                                 || CASE WHEN coalesce(c.candidates, 0) = 0
                                         THEN '; no engine request agrees with its model, time window and prompt length'
                                         WHEN c.candidates = 1 AND o.n > 0
                                         THEN '; the one engine request that agrees with its ' || c.by || ' (room '
                                              || c.shown || ') agrees in time and near in length with ' || o.n || ' other record(s) too'
                                         WHEN c.candidates = 1
                                         THEN '; the one engine request that agrees with its length (room ' || c.shown
                                              || ') is on nodes whose clock no joined record bounds: its time is not known'
                                         ELSE '; ' || c.candidates || ' engine requests agree with its ' || c.by || ' (rooms '
                                              || c.shown || CASE WHEN c.candidates > 10 THEN ', ...' ELSE '' END
                                              || '): which one it was is not in the evidence' END
            ELSE 'its ids name ' || j.rooms || ' rooms in the engine logs (' || j.room_list || '), by ' || j.how
                 || ': which one served it is not in the evidence' END AS reason
FROM join_hits j
LEFT JOIN cand c USING (file_id, row)
LEFT JOIN others o USING (file_id, row)
WHERE j.rooms <> 1 AND NOT EXISTS (SELECT 1 FROM gateway_joined x WHERE x.file_id = j.file_id AND x.row = j.row)
ORDER BY j.file_id, j.row;

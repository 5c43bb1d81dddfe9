-- Step 6 of gateway_join: makes time_joined, the records the time join gives one room each: a single
-- candidate (time_hits, length_ok), placed in time, that agrees in time and near in length with no other
-- record (a room that so agrees with two records is contested and is joined to neither). how: 'time+length'
-- (model, time window and prompt length), 'time' (the record or the room logs no length).
-- grain: one row per record joined by time; reads: time_hits; params: none
CREATE OR REPLACE TEMP TABLE time_joined AS
WITH contested AS (SELECT room FROM time_hits WHERE length_near GROUP BY room HAVING count(*) > 1),
by_time AS (
    SELECT file_id, row, any_value(room) AS room, bool_and(placed) AS placed,
           CASE WHEN bool_and(length_used) THEN 'time+length' ELSE 'time' END AS how
    FROM time_hits WHERE length_ok GROUP BY file_id, row HAVING count(*) = 1
)
SELECT file_id, row, room, how FROM by_time WHERE placed AND room NOT IN (SELECT room FROM contested);

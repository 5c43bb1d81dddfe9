-- Step 6 of gateway_join: makes gateway_joined: the records whose ids name one room, and those the time
-- join gives one room (time_hits: a single candidate, placed in time, that agrees in time and near in
-- length with no other record), each with the nodes that logged its room. how: the key that joined it, or for the time join its basis:
-- 'time+length' (model, time window and prompt length), 'time' (the record or the room logs no length).
-- grain: one row per joined record; reads: join_hits, time_hits, engine_requests, node_config; params: none
CREATE OR REPLACE TABLE gateway_joined AS
WITH contested AS (SELECT room FROM time_hits WHERE length_near GROUP BY room HAVING count(*) > 1),
by_time AS (
    SELECT file_id, row, any_value(room) AS room, bool_and(placed) AS placed,
           CASE WHEN bool_and(length_used) THEN 'time+length' ELSE 'time' END AS how
    FROM time_hits WHERE length_ok GROUP BY file_id, row HAVING count(*) = 1
), matched AS (
    SELECT file_id, row, room, how FROM join_hits WHERE rooms = 1
    UNION ALL
    SELECT file_id, row, room, how FROM by_time WHERE placed AND room NOT IN (SELECT room FROM contested)
), room_nodes AS (
    SELECT e.room,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'prefill') AS prefills,
           min(e.node) FILTER (WHERE c.role = 'prefill') AS prefill_node,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'decode') AS decodes,
           min(e.node) FILTER (WHERE c.role = 'decode') AS decode_node
    FROM engine_requests e JOIN node_config c USING (node)
    WHERE e.room IN (SELECT room FROM matched)
    GROUP BY e.room
)
SELECT m.file_id, m.row, m.room,
       CASE WHEN n.prefills = 1 THEN n.prefill_node END AS prefill_node,
       CASE WHEN n.decodes = 1 THEN n.decode_node END AS decode_node, m.how
FROM matched m LEFT JOIN room_nodes n USING (room)
ORDER BY m.file_id, m.row;

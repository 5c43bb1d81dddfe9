-- Step 3 of gateway_join: makes gateway_joined: the records whose ids name one room, with the nodes that logged it
-- grain: one row per joined record; reads: join_hits, engine_requests, node_config; params: none
CREATE OR REPLACE TABLE gateway_joined AS
WITH room_nodes AS (
    SELECT e.room,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'prefill') AS prefills,
           min(e.node) FILTER (WHERE c.role = 'prefill') AS prefill_node,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'decode') AS decodes,
           min(e.node) FILTER (WHERE c.role = 'decode') AS decode_node
    FROM engine_requests e JOIN node_config c USING (node)
    WHERE e.room IN (SELECT room FROM join_hits WHERE rooms = 1)
    GROUP BY e.room
)
SELECT j.file_id, j.row, j.room,
       CASE WHEN n.prefills = 1 THEN n.prefill_node END AS prefill_node,
       CASE WHEN n.decodes = 1 THEN n.decode_node END AS decode_node, j.how
FROM join_hits j LEFT JOIN room_nodes n USING (room)
WHERE j.rooms = 1
ORDER BY j.file_id, j.row;

-- Step 1 of gateway_join_end: makes gateway_joined: the records whose ids name one room, those the time
-- join gives one room (time_joined), and those the assignment as a whole forces (gateway_assigned: how
-- 'assigned'), each with the nodes that logged its room (a vLLM room's: those its link names, the
-- prefill its blocks were on and the decode whose line named them, vllm_block_links). how: the key that
-- joined it, or for the time join its basis: 'time+length' (model, time window and prompt length), 'time' (the record or the room
-- logs no length).
-- grain: one row per joined record; reads: join_hits, time_joined, gateway_assigned, engine_requests,
--        node_config, vllm_block_links; params: none
-- scratch: vllm_block_links
CREATE OR REPLACE TABLE gateway_joined AS
WITH matched AS (
    SELECT file_id, row, room, how FROM join_hits WHERE rooms = 1
    UNION ALL
    SELECT file_id, row, room, how FROM time_joined
    UNION ALL
    SELECT file_id, row, room, 'assigned' FROM gateway_assigned
), room_nodes AS (
    SELECT e.room,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'prefill') AS prefills,
           min(e.node) FILTER (WHERE c.role = 'prefill') AS prefill_node,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'decode') AS decodes,
           min(e.node) FILTER (WHERE c.role = 'decode') AS decode_node
    FROM (SELECT node, room FROM engine_requests
          UNION ALL SELECT sender, room FROM vllm_block_links UNION ALL SELECT node, room FROM vllm_block_links) e
    JOIN node_config c USING (node)
    WHERE e.room IN (SELECT room FROM matched)
    GROUP BY e.room
)
SELECT m.file_id, m.row, m.room,
       CASE WHEN n.prefills = 1 THEN n.prefill_node END AS prefill_node,
       CASE WHEN n.decodes = 1 THEN n.decode_node END AS decode_node, m.how
FROM matched m LEFT JOIN room_nodes n USING (room)
ORDER BY m.file_id, m.row;

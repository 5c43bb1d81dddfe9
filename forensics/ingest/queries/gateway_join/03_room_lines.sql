-- Step 3 of gateway_join: makes room_lines, every engine line of a room as the time join reads it (a
-- gateway record no id joins is matched to a room by its model, time window and prompt length).
-- A line names its room, or its rid does on that node (the room of the rid's other lines). t_us: the
-- line's time on its node's clock, cut to its resolution res_us (the record prefix's digits: the truth is
-- in [t_us, t_us + res_us)); a request log's JSON timestamp has microseconds.
-- grain: engine log line of a room (node, room, line); reads: engine_requests, engine_lines; params: none
CREATE OR REPLACE TEMP TABLE room_lines AS
WITH rid_room AS (
    SELECT node, rid, min(room) AS room FROM engine_requests
    WHERE rid IS NOT NULL AND rid <> '' AND room IS NOT NULL GROUP BY node, rid
)
SELECT e.node, coalesce(e.room, r.room) AS room, epoch_us(e.ts) AS t_us,
       coalesce(CAST(l.ts_resolution_ms AS BIGINT) * 1000, 1) AS res_us, e.input_len
FROM engine_requests e
LEFT JOIN rid_room r ON r.node = e.node AND r.rid = e.rid
LEFT JOIN engine_lines l USING (file_id, line)
WHERE e.ts IS NOT NULL AND coalesce(e.room, r.room) IS NOT NULL;

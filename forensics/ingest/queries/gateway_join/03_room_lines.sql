-- Step 3 of gateway_join: makes room_lines, every engine line of a room as the time join reads it (a
-- gateway record no id joins is matched to a room by its model, time window and prompt length).
-- A line names its room, or its rid does on that node (the room of the rid's other lines). t_us: the
-- line's time on its node's clock, cut to its resolution res_us (the record prefix's digits: the truth is
-- in [t_us, t_us + res_us)); a request log's JSON timestamp has microseconds. A Req Time Stats line gives
-- a second time: when the node got the request, its time less the stages it logs (bootstrap, prealloc,
-- transfer, queue, forward), each printed to $duration_rounding_us either way (entry true).
-- grain: engine log line of a room, and the entry time a Req Time Stats line gives (node, room, line,
--        entry); reads: engine_requests, engine_lines; params: duration_rounding_us
CREATE OR REPLACE TEMP TABLE room_lines AS
WITH rid_room AS (
    SELECT node, rid, min(room) AS room FROM engine_requests
    WHERE rid IS NOT NULL AND rid <> '' AND room IS NOT NULL GROUP BY node, rid
), lines AS (
    SELECT e.node, coalesce(e.room, r.room) AS room, epoch_us(e.ts) AS t_us,
           coalesce(CAST(l.ts_resolution_ms AS BIGINT) * 1000, 1) AS res_us, e.input_len,
           CAST(round(1e6 * (coalesce(e.bootstrap_s, 0) + coalesce(e.prealloc_s, 0) + coalesce(e.transfer_s, 0)
                             + coalesce(e.queue_s, 0) + coalesce(e.forward_s, 0))) AS BIGINT) AS stages_us,
           (e.bootstrap_s IS NOT NULL)::INT + (e.prealloc_s IS NOT NULL)::INT + (e.transfer_s IS NOT NULL)::INT
             + (e.queue_s IS NOT NULL)::INT + (e.forward_s IS NOT NULL)::INT AS stages
    FROM engine_requests e
    LEFT JOIN rid_room r ON r.node = e.node AND r.rid = e.rid
    LEFT JOIN engine_lines l USING (file_id, line)
    WHERE e.ts IS NOT NULL AND coalesce(e.room, r.room) IS NOT NULL
)
SELECT node, room, t_us, res_us, input_len, false AS entry FROM lines
UNION ALL
SELECT node, room, t_us - stages_us - stages * $duration_rounding_us, res_us + 2 * stages * $duration_rounding_us,
       input_len, true
FROM lines WHERE stages > 0;

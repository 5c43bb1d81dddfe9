-- The room the page events give a request a vLLM decode line names, by the prefill's blocks the line
-- reads: vLLM's lines name no room, and a gateway that logs none (Envoy, SMG, LiteLLM, OTLP) leaves its
-- records unjoined to the rooms the page events show exposed. A decode's `Received request` line names its
-- request (vLLM's id holds the gateway's: the macro vllm_request_keys, read by gateway_join's engine_keys)
-- and the blocks of the prefill's it reads (kv_transfer_params remote_block_ids); a prefill's page events
-- name the room each of its blocks was given to (alloc, share). A line and a room are linked where
-- - the line's ids read as one list (as pull_sightings reads them), and no other decode line names it;
-- - a room's blocks on a prefill node (its alloc and share rows' block ids, in seq order: token order) are
--   that list, and no other room's are;
-- - the room is on the line's node: its own page events there, or its sender's transfer to it;
-- - where its own events are there, the first lies within the line's request on that node's clock (its
--   lines and its page events share it): not before the line's logged time (the API server logs
--   `Received request` before the engine core has the request: vllm_clock.sql), and before the first
--   `Generated response` or `Aborted request` of its id after it, plus that line's resolution, if any.
-- Each list is one line's and one room's before the times are compared: the time test removes links,
-- never makes one. A list recurs where a prefill gives the same blocks again in the same order, and a
-- decode line may name another request's blocks (vLLM #52234's reused reference: a consumed request's
-- ids), whose own line names them too: such a list is no line's alone, and neither is linked. What is
-- assumed: that other request's line is in the logs, its list whole (a line lost or cut would leave the
-- reused list one line's: the time test then holds it only if the consumed room's first event on that node
-- lies within the later request's lines).
-- grain: decode line linked to a room (node, file_id, line); reads: engine_request_links, engine_requests,
--        engine_lines, page_events, node_config; params: none
CREATE OR REPLACE TEMP TABLE vllm_block_links AS
WITH lines AS (  -- each decode line's list of ids: flat, or the one KV cache group's (else NULL)
    SELECT node, file_id, line, rid, TRY_CAST(remote_block_ids AS BIGINT[]) AS flat,
           TRY_CAST(remote_block_ids AS BIGINT[][]) AS nested
    FROM engine_request_links WHERE role = 'decode' AND remote_block_ids IS NOT NULL
), listed AS (
    SELECT node, file_id, line, rid,
           CASE WHEN len(list_filter(flat, lambda b: b IS NULL)) = 0 THEN flat
                WHEN len(nested) = 1 AND len(list_filter(nested[1], lambda b: b IS NULL)) = 0 THEN nested[1] END
               AS blocks
    FROM lines
), named AS (  -- the lists one decode line alone names
    SELECT blocks, any_value(node) AS node, any_value(file_id) AS file_id, any_value(line) AS line,
           any_value(rid) AS rid
    FROM listed WHERE len(blocks) > 0 GROUP BY blocks HAVING count(*) = 1
), given AS (  -- each room's blocks on each prefill node, in the order given
    SELECT e.node AS sender, e.room, list(b.blk ORDER BY e.seq, b.blk) AS blocks
    FROM page_events e JOIN node_config c ON c.node = e.node AND c.role = 'prefill' AND c.page_size > 0,
         LATERAL (SELECT unnest(range(e.start // c.page_size, (e."end" - 1) // c.page_size + 1)) AS blk) b
    WHERE e.op IN ('alloc', 'share') AND e.room IS NOT NULL
    GROUP BY e.node, e.room
), owned AS (  -- the lists one room alone was given, among those a line alone names
    SELECT blocks, any_value(sender) AS sender, any_value(room) AS room
    FROM given WHERE blocks IN (SELECT blocks FROM named) GROUP BY blocks HAVING count(*) = 1
), placed AS (  -- the decode nodes each such room is on, and its first own event there (NULL: a transfer only)
    SELECT e.node, e.room, min(e.ts) AS first_ts
    FROM page_events e JOIN node_config c ON c.node = e.node AND c.role = 'decode'
    WHERE e.room IN (SELECT room FROM owned) GROUP BY e.node, e.room
    UNION ALL
    SELECT DISTINCT peer, room, NULL FROM page_events
    WHERE op = 'transfer' AND peer IS NOT NULL AND room IN (SELECT room FROM owned)
), linked AS (
    SELECT n.node, n.file_id, n.line, n.rid, o.room, o.sender, min(p.first_ts) AS first_ts
    FROM named n JOIN owned o USING (blocks) JOIN placed p ON p.node = n.node AND p.room = o.room
    GROUP BY ALL
), windows AS (  -- each linked line's time, and the first end line of its id on its node after it
    SELECT k.*, epoch_us(r.ts) AS t_in,
           (SELECT min(epoch_us(e.ts) + coalesce(CAST(el.ts_resolution_ms AS BIGINT) * 1000, 1000000))
            FROM engine_requests e LEFT JOIN engine_lines el USING (file_id, line)
            WHERE e.node = k.node AND e.kind IN ('finished', 'aborted') AND e.ts >= r.ts
              AND (e.rid = k.rid OR regexp_replace(e.rid, '-[0-9a-f]{8}$', '') = k.rid)) AS t_out
    FROM linked k JOIN engine_requests r ON r.file_id = k.file_id AND r.line = k.line AND r.kind = 'received'
)
SELECT node, file_id, line, rid, room, sender
FROM windows
WHERE first_ts IS NULL OR (epoch_us(first_ts) >= t_in AND (t_out IS NULL OR epoch_us(first_ts) < t_out))
ORDER BY node, file_id, line;

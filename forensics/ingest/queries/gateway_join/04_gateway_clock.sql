-- Step 4 of gateway_join: makes gateway_clock, each node's clock against the gateway's, from the records
-- the ids joined. A successful request reached the engines after the gateway received it and left them
-- before the gateway logged its end, so each engine line of its room lies in the record's window
-- [ts, ts + duration_ms] on the gateway clock; the offset (node clock - gateway clock, microseconds) of
-- each node then lies in every such line's bounds: lo_us < offset < hi_us, from the largest lower bound to
-- the smallest upper one. A gateway time is read to the millisecond ($gw_slack_us either side of the
-- start, twice that of the end: start and duration are each rounded). A failed request's lines may
-- follow its end (an abort: prefill still sends), so only successes bound the clock. consistent: the
-- bounds leave room for an offset (lo_us < hi_us); a node without them places no line on the gateway
-- clock, and the time join does not use its lines.
-- grain: node; reads: join_hits, gateway, room_lines; params: gw_slack_us
CREATE OR REPLACE TABLE gateway_clock AS
WITH windows AS (
    SELECT j.room, epoch_us(g.ts) - $gw_slack_us AS gs,
           epoch_us(g.ts) + CAST(round(g.duration_ms * 1000) AS BIGINT) + 2 * $gw_slack_us AS ge
    FROM join_hits j JOIN gateway g USING (file_id, row)
    WHERE j.rooms = 1 AND g.status BETWEEN 200 AND 299 AND g.ts IS NOT NULL AND g.duration_ms IS NOT NULL
)
SELECT l.node, count(DISTINCT w.room) AS rooms, max(l.t_us - w.ge) AS lo_us, min(l.t_us + l.res_us - w.gs) AS hi_us,
       max(l.t_us - w.ge) < min(l.t_us + l.res_us - w.gs) AS consistent
FROM windows w JOIN room_lines l USING (room)
GROUP BY l.node
ORDER BY l.node;

-- Per room on each decode node, its lifecycle there as the engine logs give it, in seconds on the
-- decode node's clock: the input of the allocator model (forensics.findings.likelihood).
-- A finished room: its decode Req Time Stats line is logged at the end of decode (t_end); the
-- durations before it give decode start (t_read = t_end - forward_duration), the transfer's landing
-- (t_land = t_read - queue_duration) and the pre-allocation (t_alloc = t_land - transfer_duration).
-- An aborted room (a decode transfer failure names it): its pages go back at the failure's line
-- (t_free); its pre-allocation is its prefill start_time moved onto the decode clock plus the node's
-- median prealloc_duration (unc_alloc: half the 10th-to-90th percentile spread); its transfer lands
-- when its prefill's Req Time Stats line says, moved onto the decode clock. Both lines of a finished
-- room mark its landing: a line's time is its true time cut to the line's resolution, and decode's
-- t_land is also off by its two durations' rounding, so each finished room bounds the offset of the two
-- clocks, prefill minus decode, to [p_t - (t_land + res + r), p_t + p_res - t_land + r] (r: the
-- durations' rounding; the macros landing_offset_lo and landing_offset_hi, the rule the watcher applies
-- too: forensics.engines.sglang.landing_offset), and the offset lies in every room's bounds: from the
-- largest lower to the smallest upper one (in the other order when the bounds disagree: the wider
-- interval). The landing then lies in [t_land_lo, t_land_hi]; t_land is its middle and
-- unc_land half its width. NULL times are unknown.
-- n_xfer: the tokens the transfer writes (the prefill's input length: 1 for a placeholder).
-- A line without a time (some versions' request log) places nothing.
-- grain: node, room; reads: engine_requests, engine_lines, node_config; params: none
CREATE OR REPLACE TEMP TABLE node_lifecycle AS
WITH lines AS (
    SELECT e.*, l.ts_resolution_ms / 1000.0 AS res, epoch_us(e.ts) / 1e6 AS t, epoch_us(e.start_time) / 1e6 AS start_t
    FROM engine_requests e LEFT JOIN engine_lines l USING (file_id, line)
    WHERE e.room IS NOT NULL
), decode AS (
    SELECT node, room,
           max(input_len) FILTER (WHERE kind IN ('time_stats', 'finished')) AS n_read,
           max(output_len) FILTER (WHERE kind = 'time_stats') AS n_out,
           max(t) FILTER (WHERE kind = 'time_stats') AS t_end,
           max(forward_s) FILTER (WHERE kind = 'time_stats') AS fwd,
           max(queue_s) FILTER (WHERE kind = 'time_stats') AS queue_s,
           max(transfer_s) FILTER (WHERE kind = 'time_stats') AS transfer_s,
           max(prealloc_s) FILTER (WHERE kind = 'time_stats') AS prealloc_s,
           min(start_t) FILTER (WHERE kind = 'time_stats') AS start_t,
           min(t) FILTER (WHERE kind LIKE 'decode_%_failed') AS t_free,
           max(res) AS res
    FROM lines
    WHERE node IN (SELECT node FROM node_config WHERE role = 'decode')
      AND (detail IS DISTINCT FROM 'prefill' OR kind <> 'time_stats')
    GROUP BY node, room
), prefill AS (  -- the prefill side of each room: its node, landing line and start time
    SELECT room, arg_min(node, t) AS p_node, min(t) AS p_t, arg_min(res, t) AS p_res, min(input_len) AS p_input,
           min(start_t) AS p_start
    FROM lines WHERE kind = 'time_stats' AND detail = 'prefill' GROUP BY room
), timed AS (
    SELECT d.*, p.p_node, p.p_t, p.p_res, p.p_input, p.p_start,
           d.t_end - d.fwd AS t_read, d.t_end - d.fwd - d.queue_s AS t_land,
           d.t_end - d.fwd - d.queue_s - d.transfer_s AS t_alloc
    FROM decode d LEFT JOIN prefill p USING (room)
), land_fit AS (  -- prefill clock minus decode clock, per node pair, from the finished rooms
    SELECT node, p_node, max(landing_offset_lo(p_t, t_land, res)) AS off_lo,
           min(landing_offset_hi(p_t, p_res, t_land)) AS off_hi
    FROM timed WHERE t_land IS NOT NULL AND p_t IS NOT NULL AND t_free IS NULL GROUP BY ALL
), land AS (
    SELECT t.node, t.room, t.p_t - greatest(f.off_lo, f.off_hi) AS t_land_lo,
           t.p_t + t.p_res - least(f.off_lo, f.off_hi) AS t_land_hi
    FROM timed t JOIN land_fit f ON f.node = t.node AND f.p_node = t.p_node WHERE t.t_free IS NOT NULL
), start_fit AS (  -- the decode clock at pre-allocation minus start_time, and the pre-allocation's own spread
    SELECT node, median(t_alloc - prealloc_s - start_t) AS off, median(prealloc_s) AS prealloc,
           (quantile_cont(prealloc_s, 0.9) - quantile_cont(prealloc_s, 0.1)) / 2 AS spread
    FROM timed WHERE t_alloc IS NOT NULL AND start_t IS NOT NULL GROUP BY node
)
SELECT t.node, t.room, t.n_read, coalesce(least(t.p_input, t.n_read), t.n_read) AS n_xfer,
       CASE WHEN t.t_free IS NULL THEN t.n_out ELSE 0 END AS n_out,
       t.t_free IS NOT NULL AS aborted, t.res,
       CASE WHEN t.t_free IS NULL THEN t.t_alloc
            ELSE least(coalesce(t.p_start + s.off + s.prealloc, t.t_free - t.res), t.t_free) END AS t_alloc,
       CASE WHEN t.t_free IS NULL THEN t.t_land ELSE (l.t_land_lo + l.t_land_hi) / 2 END AS t_land,
       CASE WHEN t.t_free IS NULL THEN t.t_read END AS t_read,
       CASE WHEN t.t_free IS NULL THEN t.t_end END AS t_end,
       t.t_free,
       CASE WHEN t.t_free IS NULL THEN t.res / 2
            ELSE greatest(coalesce(s.spread, 0), t.res / 2) + CASE WHEN t.p_start IS NULL THEN 1 ELSE 0 END END AS unc_alloc,
       CASE WHEN t.t_free IS NULL THEN t.res / 2 ELSE (l.t_land_hi - l.t_land_lo) / 2 END AS unc_land,
       CASE WHEN t.t_free IS NULL THEN t.t_land ELSE l.t_land_lo END AS t_land_lo,
       CASE WHEN t.t_free IS NULL THEN t.t_land + t.res ELSE l.t_land_hi END AS t_land_hi
FROM timed t LEFT JOIN land l ON l.node = t.node AND l.room = t.room LEFT JOIN start_fit s ON s.node = t.node
WHERE t.n_read IS NOT NULL AND (t.t_free IS NOT NULL OR t.t_alloc IS NOT NULL);

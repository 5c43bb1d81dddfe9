-- Per room on each node without page telemetry, what the node's engine log says of it, on the node's
-- own clock: read once here for both the decode side of the placeholder signature
-- (signature_responses) and where a possible source's KV was (possible_sources).
-- decode_input, decode_output, forward_start, decode_why, finished: from its Req Time Stats /
-- request.finished lines (output_place: the first that states an output length above 0)
-- (forward_start: the line's time minus forward_duration); started: its Req Time Stats start_time
-- (when it entered the scheduler); last_seen: its last line of any kind; aborted: a decode transfer
-- failure names it; place: a line that names it, as "file line N".
-- grain: node, room; reads: engine_requests, files, telemetry_nodes; params: none
CREATE OR REPLACE TEMP TABLE dark_rooms AS
SELECT e.node, e.room,
       max(e.input_len) FILTER (WHERE e.kind IN ('time_stats', 'finished')) AS decode_input,
       min(e.ts - to_microseconds((e.forward_s * 1e6)::BIGINT))
           FILTER (WHERE e.kind IN ('time_stats', 'finished') AND e.forward_s IS NOT NULL) AS forward_start,
       nullif(array_to_string(list_sort(list_distinct(
           list('decode ran the room with input length ' || e.input_len || ' (' || f.path || ' line ' || e.line || ')')
               FILTER (WHERE e.kind IN ('time_stats', 'finished')))), '; '), '') AS decode_why,
       max(e.ts) FILTER (WHERE e.kind IN ('time_stats', 'finished')) AS finished,
       max(e.output_len) FILTER (WHERE e.kind IN ('time_stats', 'finished')) AS decode_output,
       min(f.path || ' line ' || e.line) FILTER (WHERE e.kind IN ('time_stats', 'finished') AND e.output_len > 0)
           AS output_place,
       min(e.start_time) FILTER (WHERE e.kind = 'time_stats') AS started,
       max(e.ts) AS last_seen,
       bool_or(e.kind LIKE 'decode_%_failed') AS aborted,
       any_value(e.rid ORDER BY e.file_id, e.line) AS rid,
       min(f.path || ' line ' || e.line) AS place
FROM engine_requests e JOIN files f USING (file_id)
WHERE e.room IS NOT NULL AND e.node NOT IN (SELECT node FROM telemetry_nodes)
GROUP BY e.node, e.room;

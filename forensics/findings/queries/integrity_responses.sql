-- The client requests an engine's integrity line names (forensics.engines.integrity), and what the line
-- does to each one's finding: `confirm` (its response read KV that was not its own) or `doubt` (it is
-- not clean: indeterminate at least).
-- A canary line whose reason is a read check (verify_*: the macro canary_read_violation) of a forward's reads (launch tags HEAD_*, TAIL_*)
-- proves its slot held, at that read, KV other than what its holder wrote; it does not say whose. (A
-- sweep's line, SWEEP_*, checks slots the radix cache keeps, which no request may be reading: it names
-- no response.) Its holder: on a node with page telemetry, the room of the latest alloc of that slot at
-- or before the line, unless that room freed it before the line (confirm); on a node without, the rooms whose
-- pages the logs place on the node at the line's time (node_lifecycle: t_alloc less its uncertainty to
-- t_end, or t_free for an aborted room; the line's resolution either side): confirm when one room fits
-- and no log outage of the node may hide another, else doubt each (the line does not say which).
-- A checksum mismatch names its room: the KV that landed there is not what prefill sent; SGLang aborts
-- the request before it emits a token (disaggregation/decode.py 0.5.23), so its response is doubted,
-- never confirmed, by the line. A canary or checksum line without a time places nothing.
-- vLLM's NIXL lines name a request by vLLM's ids (the macro vllm_request_keys: the gateway's request id
-- inside them), on the node that wrote them: a transfer failure (the decode's receive, or the prefill's
-- push, failed: the connector marks the blocks invalid, and vLLM then fails the request or, with
-- kv_load_failure_policy recompute, computes them again), an expiry (prefill freed the request's blocks
-- when their lease ran out, before every decode worker said it had read them) or a read of blocks prefill
-- had already freed. Each doubts the response it names, where it was delivered (a 2xx or tokens): what KV
-- it attended, the line does not say (a recompute, the KV sent, or whatever the blocks held); it needs no
-- time (the id names the request; the gateway's time places it in the window). Where a line's keys name
-- gateway records of more than one length, the longest (most specific) names it.
-- A Mooncake slice failure names addresses and NICs, no room or request: it places nothing here (the
-- engine's own transfer-failure line for the room is the logs-only rules').
-- grain: request_id, file_id, line; reads: integrity_events, engine_lines, page_events, telemetry_nodes,
--        node_lifecycle, log_outages, gateway, files, replay_window; params: none
CREATE OR REPLACE TABLE integrity_responses AS
WITH ev AS (
    SELECT i.*, f.path || ':' || i.line AS cite, coalesce(l.ts_resolution_ms, 1000) / 1000.0 AS res
    FROM integrity_events i JOIN files f USING (file_id)
    LEFT JOIN engine_lines l ON l.file_id = i.file_id AND l.line = i.line
    WHERE i.ts IS NOT NULL
      AND (i.kind = 'checksum_mismatch' OR i.kind = 'canary_violation' AND canary_read_violation(i.reason))
), last_alloc AS (  -- node with page telemetry: the slot's latest alloc at or before the line
    SELECT e.file_id, e.line, any_value(e.node) AS node, any_value(e.slot) AS slot, any_value(e.ts) AS ts,
           arg_max(p.room, (p.ts, p.seq)) AS room, max(p.ts) AS alloc_ts
    FROM ev e JOIN page_events p ON p.node = e.node AND p.op = 'alloc' AND p.start <= e.slot AND e.slot < p."end"
        AND p.ts <= e.ts
    WHERE e.kind = 'canary_violation' AND e.node IN (SELECT node FROM telemetry_nodes)
    GROUP BY e.file_id, e.line
), held_pages AS (  -- ... still held at the line: no free of it by that room in between
    SELECT a.file_id, a.line, a.room FROM last_alloc a
    WHERE NOT EXISTS (SELECT 1 FROM page_events f WHERE f.node = a.node AND f.op = 'free' AND f.room = a.room
                      AND f.start <= a.slot AND a.slot < f."end" AND f.ts >= a.alloc_ts AND f.ts < a.ts)
), held_logs AS (  -- node without: the rooms the logs place there at the line's time (an aborted room
                    -- until its pages go back); one fits only where no log outage may hide another
    SELECT e.file_id, e.line, n.room,
           CASE WHEN e.node IN (SELECT node FROM log_outages) THEN 0
                ELSE count(*) OVER (PARTITION BY e.file_id, e.line) END AS fits
    FROM ev e JOIN node_lifecycle n ON n.node = e.node
        AND n.t_alloc - n.unc_alloc - e.res <= epoch_us(e.ts) / 1e6
        AND epoch_us(e.ts) / 1e6 <= coalesce(n.t_end, n.t_free) + e.res
    WHERE e.kind = 'canary_violation' AND e.node NOT IN (SELECT node FROM telemetry_nodes)
), named AS (
    SELECT e.file_id, e.line, e.node, h.room, 'confirm' AS effect, e.cite,
           'a KV canary line (' || e.cite || ') found slot ' || e.slot || ' (position ' || e.position
           || ') holding KV other than what this request wrote, at a read while it held the slot on ' || e.node
           || ' (its page events): whose KV it was, the line does not say' AS why
    FROM ev e JOIN held_pages h USING (file_id, line)
    UNION ALL
    SELECT e.file_id, e.line, e.node, h.room, CASE WHEN h.fits = 1 THEN 'confirm' ELSE 'doubt' END, e.cite,
           'a KV canary line (' || e.cite || ') found slot ' || e.slot || ' (position ' || e.position
           || ') holding KV other than what its holder wrote, at a read on ' || e.node
           || CASE WHEN h.fits = 1 THEN ' while this request alone held pages there (its logs)'
                   WHEN h.fits = 0 THEN ' while this request held pages there (its logs; the node''s logs have an '
                        || 'outage, so others may have): which one held the slot, the line does not say'
                   ELSE ' while this request was one of ' || h.fits || ' holding pages there (its logs): which one held '
                        || 'the slot, the line does not say' END
           || '; whose KV it was, the line does not say'
    FROM ev e JOIN held_logs h USING (file_id, line)
    UNION ALL
    SELECT e.file_id, e.line, e.node, e.room, 'doubt', e.cite,
           'a KV checksum mismatch line (' || e.cite || ') on its room: the KV that landed in its pages on ' || e.node
           || ' is not what prefill sent (SGLang aborts such a request before it emits a token)'
    FROM ev e WHERE e.kind = 'checksum_mismatch'
), nixl_named AS (  -- the gateway records a NIXL line's keys name on its node; the most specific (longest)
    SELECT i.file_id, i.line, i.node, i.kind, i.reason, g.request_id, g.bootstrap_room AS room, g.ts, g.status,
           g.completion_tokens
    FROM (SELECT DISTINCT file_id, line, node, kind, reason,  -- each key once: an equi-join on the gateway
                 unnest(vllm_request_keys(request_id) || vllm_request_keys(remote_request_id)) AS key
          FROM integrity_events WHERE kind IN ('nixl_failure', 'nixl_expired')) i
    JOIN gateway g ON g.request_id = i.key
        AND (i.node = g.decode_node OR i.node = g.prefill_node OR g.decode_node IS NULL OR g.prefill_node IS NULL)
    QUALIFY length(g.request_id) = max(length(g.request_id)) OVER (PARTITION BY i.file_id, i.line)
), nixl AS (  -- ... whose response was delivered, in the window
    SELECT n.file_id, n.line, n.node, n.kind, n.reason, f.path || ':' || n.line AS cite, n.request_id, n.room
    FROM nixl_named n JOIN files f USING (file_id)
    CROSS JOIN replay_window w
    WHERE (n.status BETWEEN 200 AND 299 OR coalesce(n.completion_tokens, 0) > 0)
      AND (n.ts IS NULL OR (n.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ)
                            AND n.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)))
)
SELECT DISTINCT g.request_id, n.node, n.room, n.effect, n.cite, n.why, n.file_id, n.line
FROM named n JOIN gateway g ON g.bootstrap_room = n.room AND (g.decode_node IS NULL OR g.decode_node = n.node)
WHERE g.request_id IS NOT NULL
UNION
SELECT request_id, node, room, 'doubt', cite,
       CASE WHEN kind = 'nixl_failure'
            THEN 'a NIXL transfer failure line (' || cite || ') on ' || node || ' names this request (' || reason
                 || '): its KV transfer failed and the connector marked the blocks invalid, yet its response was '
                 || 'delivered; whether it attended KV computed again (kv_load_failure_policy recompute), the KV '
                 || 'sent, or whatever its blocks held, the line does not say'
            WHEN reason LIKE 'read by a decode worker after release%'
            THEN 'a NIXL line (' || cite || ') on ' || node || ' says a decode worker read this request''s KV '
                 || 'blocks after prefill had freed them, and its response was delivered: they may have held '
                 || 'another request''s KV by then; whose, the line does not say'
            ELSE 'a NIXL expiry line (' || cite || ') on ' || node || ' names this request (' || reason
                 || '): prefill freed its KV blocks before every decode worker said it had read them, and its '
                 || 'response was delivered: a read after the release may have found another request''s KV; '
                 || 'whether one did, the line does not say' END,
       file_id, line
FROM nixl;

-- Adds to gateway_clock each vLLM node's clock against the gateway's: vLLM's lines name no room, so the
-- time join's room lines (gateway_join) give such a node no row; its request lines name the request by
-- vLLM's ids, which hold the gateway's request id (the macro vllm_request_keys; a proxy forwards it as
-- X-Request-Id) or the record's engine_id where its format carries one. What each line's time is (vLLM
-- 0.29.0, docs/vllm-lines.md "The lines' times"):
-- `Received request` is logged when the API server has the request and before it hands it to the engine
-- (entrypoints/openai/chat_completion/serving.py:332 _log_inputs -> entrypoints/serve/engine/serving.py:107),
-- `Added request` once the engine core has it (v1/engine/async_llm.py:514), `Generated response` before
-- the response is returned (chat_completion/serving.py:1203, `return response` at 1212) or, streaming,
-- before the last `data: [DONE]` is sent (serving.py:894, the yield at 910). A successful request reached
-- both of its nodes after the gateway received it (the proxy sends the prefill, then the decode, on the
-- client's request) and both logged those lines before the gateway logged its end, so each such line lies
-- in the record's window [ts, ts + duration_ms] on the gateway clock: the node's offset (node clock -
-- gateway clock) lies in (t_us - window end, t_us + res_us - window start), as for the SGLang lines
-- (gateway_join/04_gateway_clock.sql: the same slack for the gateway's milliseconds; t_us the record's
-- time cut to its resolution res_us: a second for vLLM's text records). `Aborted request(s)` and the NIXL
-- lines are not read: an abort may be logged after the gateway's end, and a NIXL line may follow the
-- response (the prefill's lease expiry). Only successes bound the clock, each line by the one record its
-- ids name (a line whose keys name several records, or a request id several records carry, bounds
-- nothing: which window it lies in is not known), and only on a node the record names (where it names any).
-- The rows follow gateway_clock's (a node is of one engine: the two never name the same node), in node order.
-- grain: node; reads: gateway, engine_requests, engine_lines, node_config; params: gw_slack_us
INSERT INTO gateway_clock
WITH recs AS (  -- the successful records, each request id carried by one record
    SELECT request_id, any_value(engine_id) AS engine_id, any_value(prefill_node) AS prefill_node,
           any_value(decode_node) AS decode_node, any_value(epoch_us(ts)) - $gw_slack_us AS gs,
           any_value(epoch_us(ts) + CAST(round(duration_ms * 1000) AS BIGINT)) + 2 * $gw_slack_us AS ge,
           bool_and(status BETWEEN 200 AND 299 AND ts IS NOT NULL AND duration_ms IS NOT NULL) AS ok
    FROM gateway WHERE request_id IS NOT NULL
    GROUP BY request_id HAVING count(*) = 1
), rec_keys AS (  -- the ids the engines may know each by: its request id, and its engine_id where the format
                  -- carries one (the x-request-id a proxy forwards, docs/gateway-formats.md)
    SELECT request_id AS key, * FROM recs
    UNION
    SELECT engine_id, * FROM recs WHERE engine_id IS NOT NULL
), lines AS (  -- the vLLM nodes' request lines that lie in their request's window
    SELECT e.node, e.file_id, e.line, e.rid, epoch_us(e.ts) AS t_us,
           coalesce(CAST(l.ts_resolution_ms AS BIGINT) * 1000, 1000000) AS res_us
    FROM engine_requests e JOIN engine_lines l USING (file_id, line)
    WHERE e.node IN (SELECT node FROM node_config WHERE engine = 'vllm')
      AND e.kind IN ('received', 'added', 'finished') AND e.ts IS NOT NULL AND e.rid IS NOT NULL
), keyed AS (  -- each line with the ids its request id may hold (distinct)
    SELECT *, unnest(vllm_request_keys(rid)) AS key FROM lines
), named AS (  -- each line with the records its keys name
    SELECT DISTINCT l.node, l.file_id, l.line, l.t_us, l.res_us, r.request_id, r.gs, r.ge, r.ok
    FROM keyed l JOIN rec_keys r USING (key)
    WHERE l.node IN (r.prefill_node, r.decode_node) OR (r.prefill_node IS NULL AND r.decode_node IS NULL)
), counted AS (
    SELECT *, count(*) OVER (PARTITION BY file_id, line) AS records FROM named
)
SELECT node, count(DISTINCT request_id) AS rooms, max(t_us - ge) AS lo_us, min(t_us + res_us - gs) AS hi_us,
       max(t_us - ge) < min(t_us + res_us - gs) AS consistent
FROM counted WHERE records = 1 AND ok
GROUP BY node
ORDER BY node;

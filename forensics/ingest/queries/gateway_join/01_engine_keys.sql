-- Gateway records without bootstrap_room (real gateways do not log it: docs/gateway-formats.md), joined
-- to the engines' request logs: the record's request_id or engine_id equals a rid the engines logged
-- (Req Time Stats, Receive/Finish, request.received/finished) or the x-request-id a request log
-- recorded (engine_requests.forwarded_id), or its trace id is an SGLang span's (engine_spans), or it is
-- one of the ids (the macro vllm_request_keys) of a vLLM decode line the prefill's blocks it names link
-- to a room (vllm_block_links). The room so found gives the nodes: the prefill and the decode node whose
-- logs name it, or that link names (one of each, else the node stays unknown). A record whose keys name no room is matched by its model, time window and prompt
-- length to the rooms no record claims (steps 3 to 5: the time join); one that still has no single room,
-- or whose keys name more than one, is not joined: it is listed in gateway_unjoined with the reason, and
-- stays a record (of a request whose room is unknown).
-- grain: key, room: the ids the engines know each room by; reads: engine_requests, engine_spans,
--        vllm_block_links; params: none
-- scratch: engine_keys (join_hits, of this step, is its last reader)
CREATE OR REPLACE TEMP TABLE engine_keys AS
WITH rid_room AS (  -- a rid's room, from any of its lines on that node
    SELECT node, rid, any_value(room) AS room FROM engine_requests
    WHERE rid IS NOT NULL AND rid <> '' AND room IS NOT NULL GROUP BY node, rid
)
SELECT DISTINCT rid AS key, room, 'engine rid' AS how FROM rid_room
UNION
SELECT DISTINCT e.forwarded_id, coalesce(e.room, r.room), 'x-request-id in an engine request log'
FROM engine_requests e LEFT JOIN rid_room r ON r.node = e.node AND r.rid = e.rid
WHERE e.forwarded_id IS NOT NULL AND coalesce(e.room, r.room) IS NOT NULL
UNION
SELECT DISTINCT 'trace:' || trace_id, room, 'trace id of an SGLang span' FROM engine_spans
WHERE trace_id IS NOT NULL AND room IS NOT NULL
UNION
SELECT DISTINCT unnest(vllm_request_keys(rid)), room, 'vLLM decode line naming the room''s prefill blocks'
FROM vllm_block_links;

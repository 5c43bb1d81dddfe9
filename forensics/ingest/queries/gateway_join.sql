-- Gateway records without bootstrap_room (real gateways do not log it: docs/gateway-formats.md), joined
-- to the engines' request logs: the record's request_id or engine_id equals a rid the engines logged
-- (Req Time Stats, Receive/Finish, request.received/finished) or the x-request-id a request log
-- recorded (engine_requests.forwarded_id), or its trace id is an SGLang span's (engine_spans). The room
-- so found gives the nodes: the prefill and the decode node whose logs name it (one of each, else the
-- node stays unknown). A record whose keys name no room, or more than one, is not joined: it is listed
-- in gateway_unjoined with the reason, and stays a record (of a request no engine log shows).
-- grain: gateway_joined: one row per joined record; gateway_unjoined: one row per record not joined;
--        reads: gateway, engine_requests, engine_spans, node_config; params: none
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
WHERE trace_id IS NOT NULL AND room IS NOT NULL;

CREATE OR REPLACE TEMP TABLE join_hits AS
WITH pending AS (
    SELECT file_id, row, request_id, engine_id, trace_id FROM gateway WHERE bootstrap_room IS NULL
), hits AS (
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = p.request_id
    UNION ALL
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = p.engine_id
    UNION ALL
    SELECT p.file_id, p.row, k.room, k.how FROM pending p JOIN engine_keys k ON k.key = 'trace:' || p.trace_id
)
SELECT p.file_id, p.row, p.request_id, p.engine_id, p.trace_id,
       count(DISTINCT h.room) AS rooms, min(h.room) AS room,
       string_agg(DISTINCT h.room::VARCHAR, ', ' ORDER BY h.room::VARCHAR) AS room_list,
       string_agg(DISTINCT h.how, '; ' ORDER BY h.how) AS how
FROM pending p LEFT JOIN hits h USING (file_id, row)
GROUP BY ALL;

CREATE OR REPLACE TABLE gateway_joined AS
WITH room_nodes AS (
    SELECT e.room,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'prefill') AS prefills,
           min(e.node) FILTER (WHERE c.role = 'prefill') AS prefill_node,
           count(DISTINCT e.node) FILTER (WHERE c.role = 'decode') AS decodes,
           min(e.node) FILTER (WHERE c.role = 'decode') AS decode_node
    FROM engine_requests e JOIN node_config c USING (node)
    WHERE e.room IN (SELECT room FROM join_hits WHERE rooms = 1)
    GROUP BY e.room
)
SELECT j.file_id, j.row, j.room,
       CASE WHEN n.prefills = 1 THEN n.prefill_node END AS prefill_node,
       CASE WHEN n.decodes = 1 THEN n.decode_node END AS decode_node, j.how
FROM join_hits j LEFT JOIN room_nodes n USING (room)
WHERE j.rooms = 1
ORDER BY j.file_id, j.row;

CREATE OR REPLACE TABLE gateway_unjoined AS
SELECT file_id, row, request_id,
       CASE WHEN rooms = 0 THEN 'no engine request log names request id ' || request_id
                                 || coalesce(' or engine id ' || engine_id, '') || coalesce(' or trace ' || trace_id, '')
            ELSE 'its ids name ' || rooms || ' rooms in the engine logs (' || room_list || '), by ' || how
                 || ': which one served it is not in the evidence' END AS reason
FROM join_hits WHERE rooms <> 1
ORDER BY file_id, row;
DROP TABLE join_hits;
DROP TABLE engine_keys;

-- Step 3 of gateway_join_end: makes room_candidates: for each engine request (room) that no gateway
-- record's ids name and that the assignment as a whole (forensics/ingest/gateway_assign.py) leaves
-- without a single record, the records it may be (assign_open), on each node whose logs name the room:
-- the request it may be, that record's account, and the basis ('time+length': model, time window and
-- prompt length; 'time': model and time window, no length to compare). Any of them may be the request:
-- the findings name every candidate's account where such a room is an exposure's source or recipient,
-- and the notifications tell each that it may be affected. candidates: how many records the room has.
-- grain: room, node, candidate record; reads: assign_open, gateway, room_lines; params: none
-- scratch: join_hits, room_lines, time_hits, time_joined (gateway_join's, read by this step)
-- scratch: assign_edges, gateway_assigned, assign_open (forensics.ingest.gateway_assign read the first, made the others)
CREATE OR REPLACE TABLE room_candidates AS
WITH open AS (
    SELECT o.room, g.request_id, g.account_id, CASE WHEN o.length_used THEN 'time+length' ELSE 'time' END AS basis,
           count(*) OVER (PARTITION BY o.room) AS candidates
    FROM assign_open o JOIN gateway g USING (file_id, row)
)
SELECT o.room, n.node, o.request_id, o.account_id, o.basis, o.candidates
FROM open o JOIN (SELECT DISTINCT node, room FROM room_lines) n USING (room)
ORDER BY o.room, n.node, o.request_id, o.account_id, o.basis;

-- Step 7 of gateway_join: makes assign_edges, what the assignment as a whole (forensics/ingest/
-- gateway_assign.py) reads: the records still unjoined and the rooms still unclaimed after the id and
-- time joins, and each pair of them that agrees in model and time, and in prompt length within the
-- tolerance or near it (time_hits: length_ok or length_near; a record whose estimate misses the tolerance
-- is still near its own room, so a room's edges hold its own record wherever the gateway logged it).
-- length_used: the lengths were compared (basis 'time+length', else 'time').
-- grain: unjoined record x unclaimed room that agree; reads: time_hits, time_joined; params: none
CREATE OR REPLACE TEMP TABLE assign_edges AS
SELECT h.file_id, h.row, h.room, h.length_used
FROM time_hits h
WHERE (h.length_ok OR h.length_near)
  AND NOT EXISTS (SELECT 1 FROM time_joined t WHERE t.file_id = h.file_id AND t.row = h.row)
  AND h.room NOT IN (SELECT room FROM time_joined)
ORDER BY h.file_id, h.row, h.room;

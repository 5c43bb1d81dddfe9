-- The rooms one node's page events name, each once: own = it logged an event of its own for the room
-- (anything but a transfer it sent). Run once per node ($node), so each aggregate holds one node's
-- rooms and reads only that node's row groups; missing_rooms and room_requests read this table
-- instead of every event.
-- grain: node, room; reads: page_events; params: $node
INSERT INTO node_rooms
SELECT $node, room, bool_or(op <> 'transfer') AS own
FROM page_events WHERE node = $node
GROUP BY room;

-- Step 2 of room_requests: drops node_own_rooms.
-- grain: n/a (drops node_own_rooms); reads: nothing; params: none
DROP TABLE node_own_rooms;

-- The rooms one node ($node) logged an event of its own for (anything but a transfer it sent), when
-- the screening walk, which notes them as it goes (forensics.screen), does not run (--full-replay).
-- Run once per node, so each aggregate holds one node's rooms.
-- grain: node, room (the screen's rows may name a room more than once; consumers join on it);
--        reads: page_events; params: node
INSERT INTO node_own_rooms
SELECT DISTINCT $node, room FROM page_events WHERE node = $node AND op <> 'transfer';

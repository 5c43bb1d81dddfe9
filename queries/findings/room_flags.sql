-- Rooms whose answer the evidence cannot decide, with the reason. A room with a certain exposure is
-- still confirmed; these make every other room here indeterminate rather than clean.
-- grain: node, room, reason; reads: page_events, seq_gaps, read_provenance, transfer_landing; params: none
CREATE OR REPLACE TABLE room_flags AS
SELECT DISTINCT node, room, reason FROM (
    -- events on both sides of a gap: some of the room's own events may be lost
    SELECT p.node, p.room, 'events on both sides of a seq gap (' || g.missing || ' events lost after seq ' || g.prev_seq || ')' AS reason
    FROM page_events p JOIN seq_gaps g ON g.node = p.node
    WHERE p.op <> 'transfer'
    GROUP BY p.node, p.room, g.prev_seq, g.next_seq, g.missing
    HAVING min(p.seq) < g.next_seq AND max(p.seq) > g.prev_seq
    UNION ALL
    -- reads with no transfer of their own while a sender lost events
    SELECT node, room, 'no transfer of its own was logged and a sending node lost events'
    FROM gap_rooms g WHERE NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = g.node AND t.room = g.room)
      AND EXISTS (SELECT 1 FROM page_events p WHERE p.node = g.node AND p.room = g.room AND p.op = 'read')
    UNION ALL
    -- read slots whose last write is not known since a gap
    SELECT node, room, 'read slots whose last write is unknown after a seq gap'
    FROM read_provenance WHERE uncertain AND cls <> 'shared'
    UNION ALL
    -- an event of the room touching slots of a transfer whose landing order the clock bounds cannot settle
    SELECT p.node, p.room, 'a transfer from ' || t.sender || ' (room ' || t.room || ') landed in its slots at a moment the clock bounds cannot order against its events'
    FROM transfer_landing t JOIN page_events p
      ON p.node = t.receiver AND p.op <> 'transfer' AND p.seq > t.seq_lo AND p.seq < t.seq_hi
     AND p.start < t."end" AND p."end" > t.start
    WHERE t.ambiguous AND p.room <> t.room
);

-- Rooms whose answer the evidence cannot decide, with the reason. A room with a certain exposure is
-- still confirmed; these make every other room here indeterminate rather than clean.
-- grain: node, room, reason; reads: page_events, seq_gaps, read_provenance, transfer_landing, replay_window,
--        room_state, conflict_rooms, unlanded_readers; params: none
CREATE OR REPLACE TABLE room_flags AS
SELECT DISTINCT node, room, reason FROM (
    -- events on both sides of a gap: some of the room's own events may be lost
    SELECT p.node, p.room, 'events on both sides of a seq gap (' || g.missing || ' events lost after seq ' || g.prev_seq || ')' AS reason
    FROM page_events p JOIN seq_gaps g ON g.node = p.node
    WHERE p.op <> 'transfer'
    GROUP BY p.node, p.room, g.prev_seq, g.next_seq, g.missing
    HAVING min(p.seq) < g.next_seq AND max(p.seq) > g.prev_seq
    UNION ALL
    -- own events cut by a gap at either end: no alloc on the node and the first event after a gap (the
    -- alloc, and the reads after it, may be lost in it), or no free and the last event before one
    SELECT s.node, s.room, CASE WHEN s.allocs = 0 AND s.first_seq >= g.next_seq
                                THEN 'its alloc on the node is not logged and its first event follows a seq gap ('
                                ELSE 'its free on the node is not logged and its last event precedes a seq gap (' END
                           || g.missing || ' events lost after seq ' || g.prev_seq || '): its events there may be lost'
    FROM (SELECT node, room, min(seq) AS first_seq, max(seq) AS last_seq, count(*) FILTER (WHERE op = 'alloc') AS allocs,
                 count(*) FILTER (WHERE op = 'free') AS frees
          FROM page_events WHERE op <> 'transfer' AND node IN (SELECT node FROM seq_gaps WHERE kind = 'lost')
          GROUP BY node, room) s
    JOIN seq_gaps g ON g.node = s.node AND g.kind = 'lost'
    WHERE (s.allocs = 0 AND s.first_seq >= g.next_seq) OR (s.frees = 0 AND s.last_seq <= g.prev_seq)
    UNION ALL
    -- reads with no transfer of their own while a sender lost events (reads its own writes covered,
    -- which have no read_provenance rows, found no one else's data whatever a transfer did)
    SELECT node, room, CASE WHEN (SELECT since FROM replay_window) IS NULL
                            THEN 'no transfer of its own was logged and a sending node lost events or kept no page records'
                            ELSE 'no transfer of its own was logged: a sending node lost events, kept no page records, or sent it before the replay window (--since)' END
    FROM gap_rooms g WHERE NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = g.node AND t.room = g.room)
      AND EXISTS (SELECT 1 FROM read_provenance r WHERE r.node = g.node AND r.room = g.room AND r.op = 'read')
    UNION ALL
    -- read slots whose last write is not known since a gap
    SELECT r.node, r.room,
           CASE WHEN EXISTS (SELECT 1 FROM seq_gaps g WHERE g.node = r.node AND g.kind = 'lost'
                             AND g.next_pos > coalesce(r.w_pos, -1) AND g.prev_pos < r.pos)
                THEN 'read slots whose last write is unknown after a seq gap'
                WHEN r.w_room IS NULL AND EXISTS (SELECT 1 FROM seq_gaps g WHERE g.node = r.node AND g.kind = 'window_start')
                THEN 'read slots last written before the replay window (--since), or never'
                ELSE 'read slots whose last write is unknown after a seq gap' END
    FROM read_provenance r WHERE r.uncertain AND r.cls <> 'shared'
      -- a share attaches to a prefix the cache already held: cached before the window, it is still a
      -- sanctioned share (whose writer the window cannot name), not a possible exposure
      AND NOT (r.op = 'share' AND r.w_room IS NULL
               AND EXISTS (SELECT 1 FROM seq_gaps g WHERE g.node = r.node AND g.kind = 'window_start'))
    UNION ALL
    -- an event of the room touching slots of a transfer whose landing order the clock bounds cannot settle
    SELECT p.node, p.room, 'a transfer from ' || t.sender || ' (room ' || t.room || ') landed in its slots at a moment the clock bounds cannot order against its events'
    FROM transfer_landing t JOIN page_events p
      ON p.node = t.receiver AND p.op <> 'transfer' AND p.seq > t.seq_lo AND p.seq < t.seq_hi
     AND p.start < t."end" AND p."end" > t.start
    WHERE t.ambiguous AND p.room <> t.room
    UNION ALL
    -- a transfer sent that never landed in the files may have written its slots at any moment after its
    -- room took them on the receiver and before the sender concluded it: a read of those slots by another
    -- room within its reach (unlanded_readers) is not cleared
    SELECT node, room, 'a transfer from ' || sender || ' (room ' || send_room || ') into [' || start || ','
           || "end" || ') ' || CASE WHEN failed THEN 'ended Failed after it was sent'
                                    ELSE 'was sent and never logged as landed' END
           || ': it may have landed in the slots it read'
    FROM unlanded_readers
    UNION ALL
    -- a read of slots two transfers filled in an order the clock bounds cannot settle
    SELECT node, room, reason FROM conflict_rooms
    UNION ALL
    -- the replay window cuts the room's history: it read slots it had no alloc for in the window (an
    -- exposure that began before --since); exposures after --until are out of the window's scope
    SELECT DISTINCT s.node, s.room, 'it read slots allocated before the replay window (--since)'
    FROM room_state s, replay_window w
    WHERE w.since IS NOT NULL AND s.op = 'read' AND s.a_k IS NULL
);

-- The holdings of rooms whose transfer may be invisible on the receiver (no transfer of the room logged
-- there, or only from a sender that lost events): the slots, the alloc and the end of its possible
-- landing (its free there if the room read, else the node's end), with global keys as in sender_reads.sql.
-- grain: holding (or, for a room the replay keeps none of, alloc) of such a room; reads: seq_gaps,
--        page_events, holdings, node_index, transfer_links; params: none
WITH lossy AS (SELECT DISTINCT node FROM seq_gaps WHERE kind = 'lost'),
readers AS (SELECT DISTINCT node, room FROM page_events WHERE op = 'read')
SELECT h.node, h.room, h.seg_start, h.seg_end, x.base + key_pos(h.a_k) AS ga,
       CASE WHEN (h.node, h.room) IN (SELECT (node, room) FROM readers) AND h.f_k IS NOT NULL
            THEN x.base + key_pos(h.f_k) ELSE node_end(x.base) END AS gf
FROM holdings h JOIN node_index x USING (node)
WHERE h.seg_end > h.seg_start AND h.a_k IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = h.node AND t.room = h.room
                  AND t.sender NOT IN (SELECT node FROM lossy))
UNION ALL  -- rooms the replay keeps no holdings of (they never read: aborted): each alloc, landing without end
SELECT a.node, a.room, a.start, a."end", x.base + own_pos(a.seq), node_end(x.base)
FROM page_events a JOIN node_index x USING (node)
WHERE a.op = 'alloc' AND a.room IS NOT NULL AND a."end" > a.start
  AND (a.node, a.room) NOT IN (SELECT (node, room) FROM holdings)
  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = a.node AND t.room = a.room
                  AND t.sender NOT IN (SELECT node FROM lossy))
ORDER BY 1, 2, 5, 3;

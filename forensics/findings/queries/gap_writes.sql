-- The writes before each lost gap on its node, in write order: own writes at their seq, landed transfers
-- just after the receiver event before them (no receiver event on their slots lies in their window
-- unless ambiguous); items numbered as in gap_items.sql.
-- grain: lost gap x write before it on its node; reads: seq_gaps, page_events, transfer_landing; params: none
WITH gaps AS (
    SELECT row_number() OVER (ORDER BY node, prev_seq) - 1 AS item, node, prev_seq
    FROM seq_gaps WHERE kind = 'lost'
), writes AS (
    SELECT node, room, start, "end", 2 * seq AS pos FROM page_events WHERE op = 'write'
    UNION ALL
    SELECT receiver, room, start, "end", 2 * seq_lo + 1 FROM transfer_landing WHERE seq_lo IS NOT NULL
)
SELECT g.item, w.room, w.start, w."end", w.pos FROM gaps g JOIN writes w ON w.node = g.node
WHERE w.pos < 2 * g.prev_seq + 1 AND w."end" > w.start
ORDER BY g.item, w.pos, w.room, w.start;

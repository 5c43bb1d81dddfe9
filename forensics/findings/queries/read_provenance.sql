-- What each read found in the slots whose content it did not write itself since allocating them:
-- another room's data (stale, or a foreign write after its alloc), a shared prefix, its own older
-- data, or nothing ever written. `uncertain` when lost events (a seq gap between the last known
-- write and the read), a landing order the clock bounds cannot settle, or lost events of the room's
-- own could change the answer. Reads fully covered by their own writes have no rows here.
-- grain: node, room, pos, seg_start; reads: history_items, history_found, history_open, room_state,
--        seq_gaps, gap_rooms, transfer_links; params: none
CREATE OR REPLACE TABLE read_provenance AS
WITH hist AS (
    SELECT i.node, f.s AS seg_start, f.e AS seg_end, i.k, i.pos, i.op, i.room, i.ts, f.w_room, f.w_k, f.w_amb,
           i.a_k, i.f_k
    FROM (SELECT * FROM history_found
          UNION ALL SELECT item, s, e, NULL, NULL, NULL, NULL FROM history_open) f
    JOIN history_items i USING (item)
), injected AS (  -- a foreign write injected after the room's alloc and after its own last write
    SELECT node, seg_start, seg_end, k, pos, op, room, ts, i_room, i_k, i_amb, a_k, f_k
    FROM room_state
    WHERE op IN ('read', 'share') AND i_k > coalesce(a_k, -1) AND i_k > coalesce(w_k, -1)
), base AS (
    SELECT * FROM hist UNION ALL SELECT * FROM injected
)
SELECT b.node, b.seg_start, b.seg_end, b.k, b.pos, b.op, b.room, b.ts, b.w_room, b.w_k, key_pos(b.w_k) AS w_pos,
       b.a_k,
       b.room AS a_room, key_pos(b.a_k) AS a_pos,
       CASE WHEN b.w_room IS NULL THEN 'unwritten' WHEN b.w_room = b.room THEN 'own'
            WHEN b.op = 'share' THEN 'shared' ELSE 'foreign' END AS cls,
       CASE WHEN b.a_k IS NOT NULL AND b.w_k > b.a_k THEN 'foreign_write' ELSE 'stale' END AS kind,
       coalesce(b.w_amb, false)
       OR EXISTS (SELECT 1 FROM gap_rooms gr WHERE gr.room = b.room AND (gr.node <> b.node OR b.op = 'read'
                  AND NOT EXISTS (SELECT 1 FROM transfer_links t WHERE t.receiver = b.node AND t.room = b.room)))
       OR EXISTS (SELECT 1 FROM seq_gaps g WHERE g.node = b.node
                  AND g.next_pos > coalesce(key_pos(b.w_k), -1) AND g.prev_pos < b.pos) AS uncertain,
       (b.a_k IS NULL OR b.a_k < coalesce(b.f_k, -1)) AS unheld,
       false AS unsettled  -- set by conflict_reads/: two transfers may have filled these slots in either order
FROM base b;

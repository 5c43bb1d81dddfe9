-- One replay chunk's events (forensics.ownership.steps.replay): the rooms of node $node in bucket $part
-- of $parts, with the foreign writes injected into them as 'inj', op codes as numbers and times in
-- microseconds. replay_source is the timeline, or the few rooms' events copied out of it.
-- grain: event of a room in the chunk; reads: replay_source, room_injected, node_index; params: $node, $parts, $part
SELECT node_number(x.base) AS node_i, e.room, e.k, e.kg, e.pos, op_code(e.op)::TINYINT AS opc,
       e.start, e."end", e.ambiguous, epoch_us(e.ts) AS ts_us, epoch_us(e.ts_hi) AS ts_hi_us, e.src_room,
       op_code(e.src_op)::TINYINT AS src_opc
FROM (
    SELECT node, room, k, kg, pos, op, start, "end", ambiguous, ts, ts_hi, NULL::BIGINT AS src_room,
           NULL::VARCHAR AS src_op
    FROM replay_source
    UNION ALL
    SELECT node, holder, k, kg, pos, 'inj', start, "end", ambiguous, ts, ts_hi, room, op FROM room_injected
) e JOIN node_index x USING (node)
WHERE e.node = $node AND hash(e.room) % $parts = $part

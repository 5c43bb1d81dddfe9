-- One replay chunk's rows (replay_out, handed over from numpy) with node names and op names again: what
-- room_state_new holds (forensics.ownership.steps.replay).
-- grain: event of a room on one slot piece; reads: replay_out, node_index; params: none
SELECT x.node, r.room, r.seg_start AS rseg, r.seg_start, r.seg_end, r.k, r.kg, r.pos,
       op_name(r.opc) AS op, r.ambiguous, r.ts, r.ts_hi, r.src_room,
       op_name(r.src_opc) AS src_op,
       r.a_k, r.f_k, r.w_k, r.w_amb, r.r_k, r.r_ts, r.i_k, r.i_room, r.i_amb, r.nf_k, r.nf_kg
FROM replay_out r JOIN node_index x ON node_number(x.base) = r.node_i

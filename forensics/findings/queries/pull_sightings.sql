-- What a transfer carried where its sender's slots held another room's KV (vLLM's pull through a stale
-- reference, vLLM #52234): a transfer sends its room's KV from the sender's slots into the receiver's
-- slots it names, token by token; where another room wrote a sent slot after the room was given it (alloc,
-- share) and before the transfer, the receiver got the last such writer's KV in that token's slot.
-- Which sender slot held each token (basis):
-- - remote_block_ids: the blocks the receiver's request line names (vLLM's kv_transfer_params,
--   engine_request_links: NixlConnector reads block k of the request's tokens from the k-th id, the
--   blocks the decode's own prefix cache hit not read: the transfer's tokens are the last ids'), where
--   one line of the receiver names the room's request (the gateway's record of the room, its id inside
--   vLLM's: the macro vllm_request_keys) with one list of ids (a list per KV cache group: the one group's;
--   a list cut at its logged length, or several groups, names no block), the sender's block size is
--   known (node_config) and the list covers every token sent. Such a slot may never have been given to
--   the room (a reused reference names another request's blocks): then its last writer before the
--   transfer, whoever it was, is what the receiver got.
-- - token_order: elsewhere, the room's alloc/share rows and its transfer rows on the sender, each in seq
--   order, matched token by token (a vLLM sender's transfer from the block the decode's prefix hit ends
--   at, as by remote_block_ids: skipped). Another room writes a slot the room still holds only through a double
--   allocation (ownership's hazards), so only rooms that freed slots on the sender before their last
--   transfer there are searched, which keeps the range joins to those few rooms.
-- Every order here is the sender's own (its page events' seq): no other node's clock decides it.
-- certain where the receiver's page events show the room reading that slot; without them the sighting is
-- uncertain (no read is seen). first_ts: the receiver's first read of it, on the receiver's clock; without
-- one, the transfer's time (the sender's clock) moved onto the receiver's clock at the earliest the two
-- nodes' bounds against the gateway's clock allow (gateway_clock: sender time - its hi_us + the receiver's
-- lo_us; the receiver had the KV no earlier); where either node has no such bounds, the sender's time as
-- logged (no bound relates the two clocks).
-- grain: node, seg_start, recipient_room, source_room; reads: page_events, engine_request_links, gateway,
--        node_config, gateway_clock; params: none
CREATE OR REPLACE TABLE pull_sightings AS
WITH sent AS (  -- each transfer row's tokens of its room
    SELECT node, room, peer, seq, ts, start, "end",
           CAST(sum("end" - start) OVER (PARTITION BY node, room ORDER BY seq) - ("end" - start) AS BIGINT) AS tok,
           CAST(sum("end" - start) OVER (PARTITION BY node, room) AS BIGINT) AS sent_tokens
    FROM page_events WHERE op = 'transfer'
), pulls AS (  -- each room a sender sent to a receiver, with the gateway's records of the room
    SELECT DISTINCT x.node, x.peer, x.room, x.sent_tokens, g.request_id
    FROM sent x JOIN gateway g ON g.bootstrap_room = x.room
         AND (g.decode_node IS NULL OR g.decode_node = x.peer) AND (g.prefill_node IS NULL OR g.prefill_node = x.node)
), link_keys AS (  -- the receivers' request lines that name a prefill's blocks, by the ids they may hold; the
                   -- list read as one list of ids, or as a list of one group's (a list with an element that is
                   -- not an id reads as NULL: the cast leaves NULL there)
    SELECT node, file_id, line, TRY_CAST(remote_block_ids AS BIGINT[]) AS flat,
           TRY_CAST(remote_block_ids AS BIGINT[][]) AS nested, unnest(vllm_request_keys(rid)) AS request_id
    FROM engine_request_links WHERE role = 'decode' AND remote_block_ids IS NOT NULL
), lists AS (  -- per pull, each line naming it and its list of block ids (NULL where no one list is read)
    SELECT p.node, p.peer, p.room, p.sent_tokens, k.file_id, k.line,
           CASE WHEN len(list_filter(k.flat, lambda b: b IS NULL)) = 0 THEN k.flat
                WHEN len(k.nested) = 1 AND len(list_filter(k.nested[1], lambda b: b IS NULL)) = 0 THEN k.nested[1] END
               AS blocks
    FROM pulls p JOIN link_keys k ON k.node = p.peer AND k.request_id = p.request_id
), by_ids AS (  -- the pulls whose blocks one line names, every token covered, the block size known; skip:
                -- the named blocks the decode's own prefix hits left unread (NixlConnector end-trims the
                -- ids to the decode's blocks to load: 0.29.0 nixl/base_worker.py:2638-2645, 0.10.2
                -- nixl_connector.py:1181-1185), so the first token sent is the first of block skip + 1
    SELECT l.node, l.peer, l.room, any_value(l.blocks) AS blocks, any_value(c.page_size) AS bs,
           len(any_value(l.blocks)) - CAST(ceil(any_value(l.sent_tokens) / any_value(c.page_size)) AS BIGINT) AS skip
    FROM lists l JOIN node_config c ON c.node = l.node AND c.page_size > 0
    GROUP BY l.node, l.peer, l.room
    HAVING count(DISTINCT (l.file_id, l.line)) = 1 AND any_value(l.blocks) IS NOT NULL
       AND len(any_value(l.blocks)) * any_value(c.page_size) >= any_value(l.sent_tokens)
), id_ranges AS (  -- per transfer row and block it covers: the sender's slots the ids name, the receiver's
    SELECT x.node, x.room, x.peer, x.seq, x.ts, b.bs, b.blocks[b.skip + k + 1] AS blk,
           b.blocks[b.skip + k + 1] * b.bs + t_lo - k * b.bs AS s_lo,
           b.blocks[b.skip + k + 1] * b.bs + t_hi - k * b.bs AS s_hi, x.start + t_lo - x.tok AS r_lo
    FROM sent x JOIN by_ids b USING (node, peer, room),
         LATERAL (SELECT unnest(range(x.tok // b.bs, (x.tok + x."end" - x.start - 1) // b.bs + 1)) AS k) ks,
         LATERAL (SELECT greatest(x.tok, ks.k * b.bs) AS t_lo, least(x.tok + x."end" - x.start, (ks.k + 1) * b.bs) AS t_hi) tr
), id_given AS (  -- the room's latest alloc/share of those slots before the transfer (none: never given)
    SELECT r.*, (SELECT max(g.seq) FROM page_events g
                 WHERE g.node = r.node AND g.room = r.room AND g.op IN ('alloc', 'share') AND g.seq < r.seq
                   AND g.start <= r.s_lo AND r.s_hi <= g."end") AS given_seq
    FROM id_ranges r
), id_writes AS (  -- the writes on those senders, by each block they touch (the joins below are on the block)
    SELECT w.node, w.seq, w.room, w.start, w."end", unnest(range(w.start // b.bs, (w."end" - 1) // b.bs + 1)) AS blk
    FROM page_events w JOIN (SELECT DISTINCT node, bs FROM by_ids) b USING (node)
    WHERE w.op = 'write'
), id_over AS (  -- the slots another room wrote since (ever, where never given) and before the transfer
    SELECT DISTINCT r.node, r.room, r.peer, r.ts, r.blk, r.seq AS x_seq, coalesce(r.given_seq, -1) AS given_seq,
           s.slot, r.r_lo + s.slot - r.s_lo AS recv_slot
    FROM id_given r
    JOIN id_writes w ON w.node = r.node AND w.blk = r.blk AND w.room <> r.room
         AND w.start < r.s_hi AND r.s_lo < w."end" AND w.seq > coalesce(r.given_seq, -1) AND w.seq < r.seq,
         LATERAL (SELECT unnest(range(greatest(w.start, r.s_lo), least(w."end", r.s_hi))) AS slot) s
), id_carried AS (  -- per slot: its last writer in that span
    SELECT o.node, o.room, o.peer, o.ts, o.recv_slot, arg_max(w.room, w.seq) AS w_room
    FROM id_over o
    JOIN id_writes w ON w.node = o.node AND w.blk = o.blk AND w.start <= o.slot AND o.slot < w."end"
         AND w.seq > o.given_seq AND w.seq < o.x_seq
    GROUP BY o.node, o.room, o.peer, o.ts, o.recv_slot
), last_sent AS (
    SELECT node, room, max(seq) AS seq, any_value(sent_tokens) AS sent_tokens FROM sent
    WHERE (node, peer, room) NOT IN (SELECT (node, peer, room) FROM by_ids)
    GROUP BY node, room
), early AS (  -- token order: rooms that freed slots on the sender before their last transfer from it
    SELECT DISTINCT f.node, f.room, l.seq AS last_seq, l.sent_tokens
    FROM page_events f JOIN last_sent l USING (node, room)
    WHERE f.op = 'free' AND f.seq < l.seq
), given AS (  -- the sender's slots of each such room, in token order
    SELECT e.node, e.room, e.seq, e.start, e."end", l.last_seq, l.sent_tokens,
           sum(e."end" - e.start) OVER (PARTITION BY e.node, e.room ORDER BY e.seq) - (e."end" - e.start) AS tok
    FROM page_events e JOIN early l USING (node, room)
    WHERE e.op IN ('alloc', 'share') AND e.seq < l.last_seq
), skipped AS (  -- the room's first token sent: a vLLM sender's transfer is the prompt's last blocks (the
                 -- decode's own prefix hit is not read: the end-trim of by_ids), so the blocks the sender
                 -- gave the room less the blocks the transfer covers come first; an SGLang sender, or one
                 -- whose block size is unknown, sends from the first token
    SELECT g.node, g.room,
           CASE WHEN any_value(c.engine) = 'vllm' AND any_value(c.page_size) > 0
                THEN any_value(c.page_size) * greatest(0,
                     CAST(ceil(sum(g."end" - g.start) / any_value(c.page_size)) AS BIGINT)
                     - CAST(ceil(any_value(g.sent_tokens) / any_value(c.page_size)) AS BIGINT))
                ELSE 0 END AS skip_tok
    FROM given g LEFT JOIN node_config c ON c.node = g.node
    GROUP BY g.node, g.room
), over AS (  -- the slots another room wrote after the room was given them and before its last transfer
    SELECT DISTINCT g.node, g.room, s.slot, g.tok + s.slot - g.start - k.skip_tok AS tok, g.seq AS given_seq
    FROM given g JOIN skipped k USING (node, room)
    JOIN page_events w ON w.node = g.node AND w.op = 'write' AND w.room <> g.room
         AND w.start < g."end" AND g.start < w."end" AND w.seq > g.seq AND w.seq < g.last_seq,
         LATERAL (SELECT unnest(range(greatest(w.start, g.start), least(w."end", g."end"))) AS slot) s
), carried AS (  -- per transfer row covering the token: the slot's last writer since the room was given it
    SELECT o.node, o.room, x.peer, x.ts, x.start + o.tok - x.tok AS recv_slot, arg_max(w.room, w.seq) AS w_room,
           'token_order' AS basis
    FROM over o
    JOIN sent x ON x.node = o.node AND x.room = o.room AND o.tok >= x.tok AND o.tok < x.tok + x."end" - x.start
         AND (x.node, x.peer, x.room) NOT IN (SELECT (node, peer, room) FROM by_ids)
    JOIN page_events w ON w.node = o.node AND w.op = 'write' AND w.start <= o.slot AND o.slot < w."end"
         AND w.seq > o.given_seq AND w.seq < x.seq
    GROUP BY ALL
    UNION ALL
    SELECT *, 'remote_block_ids' FROM id_carried
)
SELECT c.peer AS node, c.recv_slot AS seg_start, c.recv_slot + 1 AS seg_end, c.room AS recipient_room,
       c.w_room AS source_room, 'foreign_write' AS kind,
       min(coalesce(r.ts, c.ts + to_microseconds(kr.lo_us - ks.hi_us), c.ts)) AS first_ts,
       bool_and(r.node IS NULL) AS uncertain, min(c.basis) AS basis
FROM carried c
LEFT JOIN page_events r ON r.node = c.peer AND r.op = 'read' AND r.room = c.room
     AND r.start <= c.recv_slot AND c.recv_slot < r."end"
LEFT JOIN gateway_clock ks ON ks.node = c.node AND ks.consistent
LEFT JOIN gateway_clock kr ON kr.node = c.peer AND kr.consistent
WHERE c.w_room <> c.room
GROUP BY c.peer, c.recv_slot, c.room, c.w_room;

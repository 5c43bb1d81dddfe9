-- Sanctioned prefix sharing across accounts (radix-cache hits): a timing side channel, not a leak.
-- (Distinct room-account pairs: a request logged in two gateway records counts its slots once.)
-- grain: node, reader_account, writer_account; reads: read_provenance, room_requests; params: none
SELECT p.node, r.account_id AS reader_account, w.account_id AS writer_account, count(DISTINCT p.room) AS reader_rooms,
       sum(p.seg_end - p.seg_start)::BIGINT AS slots, min(p.ts) AS first_at, max(p.ts) AS last_at
FROM read_provenance p
JOIN (SELECT DISTINCT node, room, account_id FROM room_requests) r ON r.node = p.node AND r.room = p.room
JOIN (SELECT DISTINCT node, room, account_id FROM room_requests) w ON w.node = p.node AND w.room = p.w_room
WHERE p.cls = 'shared' AND r.account_id IS DISTINCT FROM w.account_id
GROUP BY ALL ORDER BY p.node, reader_account, writer_account;

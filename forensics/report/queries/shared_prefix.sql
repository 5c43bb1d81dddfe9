-- Sanctioned prefix sharing across accounts (radix-cache hits): a timing side channel, not a leak.
-- (Distinct room-account pairs: a request logged in two gateway records counts its slots once.)
-- The slots of a share that a transfer filled with another room's KV (pull_sightings: vLLM's decode caches
-- what a stale reference brought) are an exposure (exposure_segments), not a share: left out here.
-- grain: node, reader_account, writer_account; reads: read_provenance, room_requests, pull_sightings; params: none
WITH carried AS (
    SELECT p.node, p.room, p.pos, p.seg_start, count(DISTINCT s.seg_start) AS slots
    FROM read_provenance p
    JOIN pull_sightings s ON s.node = p.node AND s.recipient_room = p.w_room AND s.source_room <> p.w_room
     AND p.seg_start <= s.seg_start AND s.seg_start < p.seg_end
    WHERE p.cls = 'shared'
    GROUP BY ALL
)
SELECT p.node, r.account_id AS reader_account, w.account_id AS writer_account, count(DISTINCT p.room) AS reader_rooms,
       sum(p.seg_end - p.seg_start - coalesce(c.slots, 0))::BIGINT AS slots, min(p.ts) AS first_at, max(p.ts) AS last_at
FROM read_provenance p
JOIN (SELECT DISTINCT node, room, account_id FROM room_requests) r ON r.node = p.node AND r.room = p.room
JOIN (SELECT DISTINCT node, room, account_id FROM room_requests) w ON w.node = p.node AND w.room = p.w_room
LEFT JOIN carried c ON c.node = p.node AND c.room = p.room AND c.pos = p.pos AND c.seg_start = p.seg_start
WHERE p.cls = 'shared' AND r.account_id IS DISTINCT FROM w.account_id
  AND p.seg_end - p.seg_start > coalesce(c.slots, 0)
GROUP BY ALL ORDER BY p.node, reader_account, writer_account;

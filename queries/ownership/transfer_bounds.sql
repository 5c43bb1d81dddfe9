-- Ordinary transfers and the clock-offset bounds they imply, per (sender, receiver).
-- A transfer is ordinary when its room allocated the slots on the receiver and read them later without
-- freeing them in between: it landed after that alloc and before that read (causality).
-- offset = receiver clock - sender clock, in microseconds: lo < offset < hi.
-- grain: transfer row (transfer_links), sender+receiver (clock_bounds); reads: page_events; params: none
CREATE OR REPLACE TABLE transfer_links AS
WITH x AS (
    SELECT node AS sender, peer AS receiver, seq AS xseq, ts AS xts, room, start, "end"
    FROM page_events WHERE op = 'transfer' AND peer IN (SELECT node FROM telemetry_nodes)
), r AS (  -- first read by the room on the receiver overlapping the transferred slots
    SELECT x.sender, x.xseq, min(p.seq) AS rseq, arg_min(p.ts, p.seq) AS rts
    FROM x JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op IN ('read', 'share')
        AND p.start < x."end" AND p."end" > x.start
    GROUP BY x.sender, x.xseq
), a AS (  -- last alloc by the room there before that read
    SELECT x.sender, x.xseq, max(p.seq) AS aseq, arg_max(p.ts, p.seq) AS ats
    FROM x JOIN r USING (sender, xseq)
    JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op = 'alloc'
        AND p.start < x."end" AND p."end" > x.start AND p.seq < r.rseq
    GROUP BY x.sender, x.xseq
), f AS (  -- a free by the room in between makes it not ordinary (aborted)
    SELECT DISTINCT x.sender, x.xseq
    FROM x JOIN r USING (sender, xseq) JOIN a USING (sender, xseq)
    JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op = 'free'
        AND p.start < x."end" AND p."end" > x.start AND p.seq > a.aseq AND p.seq < r.rseq
)
SELECT x.*, a.aseq, a.ats, r.rseq, r.rts,
       (a.aseq IS NOT NULL AND f.xseq IS NULL) AS ordinary
FROM x LEFT JOIN r USING (sender, xseq) LEFT JOIN a USING (sender, xseq) LEFT JOIN f USING (sender, xseq);

CREATE OR REPLACE TABLE clock_bounds AS
SELECT sender, receiver, count(*) AS ordinary_transfers,
       max(epoch_us(ats) - epoch_us(xts)) AS lo_us,
       min(epoch_us(rts) - epoch_us(xts)) AS hi_us,
       max(epoch_us(ats) - epoch_us(xts)) < min(epoch_us(rts) - epoch_us(xts)) AS consistent
FROM transfer_links WHERE ordinary GROUP BY sender, receiver;

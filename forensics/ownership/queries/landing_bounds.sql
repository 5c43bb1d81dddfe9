-- Each transfer with the window of receiver-clock time it landed in: after xts + lo and before
-- xts + hi, where lo < offset < hi are the clock-offset bounds of its (sender, receiver) pair
-- (NULL when the pair's ordinary transfers give no consistent bounds).
-- forensics.landing then finds the receiver seqs stamped around that window (landing_seqs).
-- A view, not a copy: 90M transfers at 1B events; it is read twice (landing_seqs, transfer_landing).
-- grain: transfer row; reads: transfer_links, clock_bounds; params: none
-- link: the transfer's row in transfer_links, an integer key for landing_seqs (joining on it instead
-- of sender name and xseq: 1.0 s against 1.5 s at 100M events, and a smaller hash table at 1B).
CREATE OR REPLACE TEMP VIEW landing_bounds AS
SELECT l.rowid AS link, l.*, b.lo_us, b.hi_us, coalesce(b.consistent, false) AS bounded,
       CASE WHEN coalesce(b.consistent, false) THEN l.xts + to_microseconds(b.lo_us) END AS land_lo,
       CASE WHEN coalesce(b.consistent, false) THEN l.xts + to_microseconds(b.hi_us) END AS land_hi
FROM transfer_links l LEFT JOIN clock_bounds b USING (sender, receiver);

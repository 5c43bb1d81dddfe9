-- The clock-offset bounds that ordinary transfers imply, per (sender, receiver): a transfer landed
-- after its room's alloc on the receiver and before its read (forensics.transfers), so
-- offset = receiver clock - sender clock, in microseconds, satisfies lo < offset < hi.
-- grain: sender+receiver; reads: transfer_links; params: none
CREATE OR REPLACE TABLE clock_bounds AS
SELECT sender, receiver, count(*) AS ordinary_transfers,
       max(epoch_us(ats) - epoch_us(xts)) AS lo_us,
       min(epoch_us(rts) - epoch_us(xts)) AS hi_us,
       max(epoch_us(ats) - epoch_us(xts)) < min(epoch_us(rts) - epoch_us(xts)) AS consistent
FROM transfer_links WHERE ordinary GROUP BY sender, receiver;

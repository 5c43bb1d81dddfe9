-- Clock offset bounds (receiver minus sender) per sender/receiver pair, from ordinary transfers.
-- grain: sender, receiver; reads: clock_bounds; params: none
SELECT sender, receiver, ordinary_transfers, lo_us, hi_us, CASE WHEN consistent THEN 'yes' ELSE 'no' END AS consistent FROM clock_bounds ORDER BY sender, receiver;

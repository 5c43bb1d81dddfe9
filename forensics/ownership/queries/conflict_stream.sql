-- The transfers into receiver $node, for the conflict walk (forensics.ownership.steps.conflicts): each
-- with its sender numbered in $senders (the receiver's senders in name order, from 1), its landing
-- window in microseconds (0 where unbounded) and whether that window is a real interval.
-- grain: transfer into $node; reads: transfer_landing; params: $node, $senders
SELECT list_position($senders, sender) AS snd, xseq, room, start, "end", seq_lo, seq_hi,
       coalesce(epoch_us(land_lo), 0) AS lo, coalesce(epoch_us(land_hi), 0) AS hi,
       (land_lo IS NOT NULL AND land_hi IS NOT NULL AND land_lo < land_hi)::BIGINT AS timed
FROM transfer_landing WHERE receiver = $node
ORDER BY seq_lo, land_lo NULLS LAST, snd, xseq  -- snd numbers the senders in name order

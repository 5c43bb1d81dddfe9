-- The pool occupancy decode node $node printed in its periodic `Decode batch` lines (batch_stats), in
-- seconds on the node's clock with each line's time resolution: the counts the allocator model's replay
-- is checked against (forensics.findings.batch_constraints), with the rank prefix of the line (each DP
-- attention rank has a pool of its own and prints its own lines). A count the release does not print is NULL.
-- grain: decode batch line of $node; reads: batch_stats, engine_lines; params: $node
SELECT epoch_us(b.ts) / 1e6 AS t, coalesce(l.ts_resolution_ms, 1000) / 1000.0 AS res, b.tokens_used,
       b.running_req, b.transfer_req, coalesce(l.rank, '') AS rank
FROM batch_stats b LEFT JOIN engine_lines l USING (file_id, line)
WHERE b.node = $node AND b.kind = 'decode' AND b.ts IS NOT NULL
ORDER BY b.ts, b.file_id, b.line

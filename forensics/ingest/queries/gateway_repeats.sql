-- The request ids still in more than one gateway record once the exact repeats are rejected (records
-- that differ in some field): the counts of requests take each once.
-- grain: request id in several gateway records; reads: gateway, repeated_hashes; params: none
INSERT INTO gateway_repeats
SELECT request_id, count(*) FROM gateway
WHERE hash(request_id) IN (SELECT h FROM repeated_hashes) GROUP BY 1 HAVING count(*) > 1
ORDER BY 1

-- The manifest's account of the gateway records the join left without a room, by why.
-- grain: reason a record was not joined; reads: gateway_unjoined; params: none
SELECT CASE WHEN rooms > 0 THEN 'its ids name several rooms'
            WHEN candidates = 0 THEN 'no engine request log names it, and none agrees in time and length'
            ELSE 'no engine request log names it, and time and length find no single one' END AS reason,
       count(*) AS records
FROM gateway_unjoined GROUP BY 1 ORDER BY 1

-- Step 1 of response_overlap: makes overlap_records, the affected rows of gateway records none of which
-- names a room (a room's row no record names may be one of them: 02_response_overlap), each record once:
-- its decode node where its rows name one and no row lacks it (else NULL: it may have been served on any
-- decode node), whether it is of the customer cohort, whether it is indeterminate (no row confirmed).
-- grain: request_id; reads: affected_responses, gateway; params: none
CREATE OR REPLACE TEMP TABLE overlap_records AS
SELECT request_id,
       CASE WHEN count(DISTINCT decode_node) = 1 AND count(decode_node) = count(*) THEN any_value(decode_node) END
         AS decode_node,
       bool_or(cohort = 'customer') AS customer, bool_and(status = 'indeterminate') AS indeterminate
FROM affected_responses a
WHERE EXISTS (SELECT 1 FROM gateway g WHERE g.request_id = a.request_id)
  AND NOT EXISTS (SELECT 1 FROM gateway g WHERE g.request_id = a.request_id AND g.bootstrap_room IS NOT NULL)
GROUP BY request_id;

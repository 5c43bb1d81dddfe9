-- Step 2 of response_overlap: makes response_overlap, the rows of affected_responses that may be one
-- response counted twice. A row of a room no gateway record names (its request id the rid its decode
-- node logged, else "room:<room>"; its account unknown) and the row of a gateway record that names no
-- room are one response when that record's request was served in that room, and nothing in the evidence says whether it was: a gateway that logs no room or decode node
-- (LiteLLM's spend logs) in front of an engine whose lines name no room (vLLM's) joins neither to the
-- other, and the record's id need not reach the engine. Such a room's row may be any such record's row
-- whose decode node is unknown or its own node; a record that names a room is that room's, and a row of
-- a room a record names is that record's. Both rows stay (never dropping a response that may be
-- affected); the headline counts them as a range (response_bounds, read by headline.sql and the report's
-- exclusion_totals): at most every row a distinct response, at least as many rooms' rows as can each be
-- a distinct one of those records' rows.
-- grain: request_id (the room's row); reads: affected_responses, gateway, overlap_records; params: none
-- candidates: the roomless records' affected rows this row may be; candidate_customer: those of the
-- customer cohort; candidate_indeterminate: those indeterminate (a confirmed room's row that is one of
-- them makes it confirmed).
CREATE OR REPLACE TABLE response_overlap AS
WITH rooms AS (  -- the rows no gateway record names: exposed rooms keyed by their decode node's rid or room
    SELECT request_id, decode_node AS node, room, cohort, status
    FROM affected_responses a
    WHERE room IS NOT NULL AND NOT EXISTS (SELECT 1 FROM gateway g WHERE g.request_id = a.request_id)
), per_node AS (  -- the records counted per decode node (NULL: none named), so no pair of a room and a
                  -- record is made
    SELECT decode_node, count(*) AS n, count(*) FILTER (WHERE customer) AS n_customer,
           count(*) FILTER (WHERE indeterminate) AS n_indeterminate
    FROM overlap_records GROUP BY decode_node
)
SELECT o.request_id, o.node, o.room, o.cohort, o.status,
       coalesce(u.n, 0) + coalesce(d.n, 0) AS candidates,
       coalesce(u.n_customer, 0) + coalesce(d.n_customer, 0) AS candidate_customer,
       coalesce(u.n_indeterminate, 0) + coalesce(d.n_indeterminate, 0) AS candidate_indeterminate
FROM rooms o
LEFT JOIN per_node u ON u.decode_node IS NULL
LEFT JOIN per_node d ON d.decode_node = o.node
WHERE u.n IS NOT NULL OR d.n IS NOT NULL;

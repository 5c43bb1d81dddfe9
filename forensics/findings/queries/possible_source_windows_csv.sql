-- possible_source_windows.csv: the possible sources of each response without page evidence, without their
-- pairs: the window they lie in on the decode node's clock and how many there are (possible_reach); and
-- each response a late transfer may have written into, with its count of aborted rooms. The pairs are the
-- view possible_sources of incident.duckdb (and possible_sources.csv where written). A window on the
-- gateway's clock (possible_windows.clock) says so: its node's engine lines bound nothing.
-- grain: recipient request, node; reads: possible_windows, possible_extra; params: none
SELECT recipient_request_id, recipient_account_id, recipient_cohort, node, recipient_room, kind,
       started AS recipient_started, finished AS recipient_finished, possible_sources, rule
FROM (
    SELECT recipient_request_id, recipient_account_id, recipient_cohort, node, recipient_room, 'window' AS kind,
           started, finished, sources AS possible_sources,
           CASE WHEN clock = 'gateway' THEN
           'every request the gateway sent to ' || node || ' that it received '
           || CASE WHEN finished IS NULL THEN 'at any time (the response''s end is not logged as a success with its duration)'
                   ELSE 'no later than ' || strftime(finished, '%Y-%m-%dT%H:%M:%S.%gZ') END
           || ' on the gateway''s clock, unless a start-up of ' || node || ' (placed on that clock by the node''s '
           || 'clock bounds) after its end and no later than '
           || CASE WHEN started IS NULL THEN 'the response''s receipt (not logged: none is ruled out)'
                   ELSE strftime(started, '%Y-%m-%dT%H:%M:%S.%gZ') END || ' emptied the pool'
           ELSE
           'every request with KV on ' || node || ' that entered its scheduler '
           || CASE WHEN finished IS NULL THEN 'at any time (the response''s decode end is not logged)'
                   ELSE 'no later than ' || strftime(finished, '%Y-%m-%dT%H:%M:%S.%gZ') END
           || ', unless a start-up of ' || node || ' after its last line and no later than '
           || CASE WHEN started IS NULL THEN 'the response''s start (not logged: none is ruled out)'
                   ELSE strftime(started, '%Y-%m-%dT%H:%M:%S.%gZ') END || ' emptied the pool' END AS rule
    FROM possible_windows
    UNION ALL
    SELECT recipient_request_id, any_value(recipient_account_id), any_value(recipient_cohort), node,
           any_value(recipient_room), 'late_write', NULL, NULL, count(*),
           'the aborted rooms whose transfers may have landed on ' || node || ' while it held pages'
    FROM possible_extra GROUP BY recipient_request_id, node
)
ORDER BY ALL

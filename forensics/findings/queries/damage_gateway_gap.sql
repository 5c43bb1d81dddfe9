-- Evidence damage: the shadow of a gateway file that is missing or cut short. A file never delivered
-- cannot be named, but the rooms the engines served while it was being written have no gateway record
-- (neither one that names the room nor one the join leaves as its candidate; a record that is the
-- candidate of $gap_min_rooms rooms or more, as a failed request of no model and no length is of every
-- room in its time window, can be at most one of them, so it makes none of them recorded). Rooms are taken in the
-- order they finished (on a decode node where one logs it); a run of such rooms, with at most
-- $gap_tolerance recorded rooms between two of them (the gateway and the engines order the ends of
-- requests served at once differently), is a gap when it holds $gap_min_rooms rooms or more and they are
-- $gap_share or more of the rooms served in its time range: one room, or a few among recorded ones, is
-- no gap. The rooms without a record outside such runs are one more row when there are $gap_min_rooms or
-- more of them and they are $gap_spread_share or more of the rooms served outside the runs: records
-- missing all along, as one of several gateway instances' files missing leaves them. The rooms are
-- counted: their requests and accounts are unknown.
-- The running counts are count(CASE ...), not count(*) FILTER (...): DuckDB adds up a filtered window
-- aggregate again for every row (quadratic in the rooms), a plain one as it goes.
-- grain: time range of served rooms without a gateway record (input, time_from); reads: engine_requests,
--        node_config, gateway, room_candidates;
--        params: gap_tolerance, gap_min_rooms, gap_share, gap_spread_share
WITH served AS (
    SELECT e.room, coalesce(min(e.ts) FILTER (WHERE c.role = 'decode'), min(e.ts)) AS ts
    FROM engine_requests e JOIN node_config c USING (node)
    WHERE e.kind = 'finished' AND e.room IS NOT NULL
    GROUP BY e.room
), shared AS (  -- candidate records and how many rooms each may be
    SELECT request_id, count(DISTINCT room) AS rooms FROM room_candidates GROUP BY request_id
), flagged AS (
    SELECT s.room, s.ts,
           NOT EXISTS (SELECT 1 FROM gateway g WHERE g.bootstrap_room = s.room)
           AND NOT EXISTS (SELECT 1 FROM room_candidates r JOIN shared h USING (request_id)
                           WHERE r.room = s.room AND h.rooms < $gap_min_rooms) AS orphan
    FROM served s
), ordered AS (
    SELECT *, count(CASE WHEN NOT orphan THEN 1 END) OVER (ORDER BY ts, room ROWS UNBOUNDED PRECEDING) AS recorded_before
    FROM flagged
), orphans AS (
    SELECT *, recorded_before - lag(recorded_before) OVER (ORDER BY ts, room) AS recorded_between
    FROM ordered WHERE orphan
), runs AS (
    SELECT *, count(CASE WHEN recorded_between IS NULL OR recorded_between > $gap_tolerance THEN 1 END)
                  OVER (ORDER BY ts, room ROWS UNBOUNDED PRECEDING) AS run
    FROM orphans
), clusters AS (
    SELECT run, count(*) AS rooms, min(ts) AS time_from, max(ts) AS time_to,
           max(recorded_before) - min(recorded_before) AS recorded_within
    FROM runs GROUP BY run
), gaps AS (
    SELECT * FROM clusters WHERE rooms >= $gap_min_rooms AND rooms >= $gap_share * (rooms + recorded_within)
), outside AS (  -- the rooms served outside the gaps
    SELECT * FROM flagged f WHERE NOT EXISTS (SELECT 1 FROM gaps g WHERE f.ts BETWEEN g.time_from AND g.time_to)
), spread AS (  -- those without a record, against every room served outside the gaps from their first to last
    SELECT count(*) FILTER (WHERE o.orphan) AS rooms, count(*) AS served,
           min(o.ts) FILTER (WHERE o.orphan) AS time_from, max(o.ts) FILTER (WHERE o.orphan) AS time_to
    FROM outside o
    WHERE o.ts BETWEEN (SELECT min(ts) FROM outside WHERE orphan) AND (SELECT max(ts) FROM outside WHERE orphan)
)
SELECT 'gateway/' AS input, 'gateway' AS source, NULL::VARCHAR AS node, 'gateway_gap' AS kind,
       format('{:,} rooms the engines served from {} to {} have no gateway record ({:,} that finished among '
              || 'them have one): a gateway file of that time may be missing, cut short or skipped; those '
              || 'requests and their accounts are unknown', rooms,
              strftime(time_from AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC'),
              strftime(time_to AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC'), recorded_within) AS detail,
       rooms AS records_lost, 'counted' AS lost_basis, time_from, time_to
FROM gaps
UNION ALL
SELECT 'gateway/', 'gateway', NULL, 'gateway_gap',
       format('{:,} of the {:,} rooms the engines served {}from {} to {} have no gateway record, spread over '
              || 'that time: a gateway file (one of several written side by side) may be missing, cut short or '
              || 'skipped, or those requests did not pass the gateway; their requests and accounts are unknown',
              rooms, served, CASE WHEN (SELECT count(*) FROM gaps) > 0 THEN 'outside the gaps listed with this one '
              ELSE '' END, strftime(time_from AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC'),
              strftime(time_to AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC')),
       rooms, 'counted', time_from, time_to
FROM spread WHERE rooms >= $gap_min_rooms AND rooms >= $gap_spread_share * served

-- Step 3 of response_overlap: makes response_bounds, the distinct responses the affected rows are, as the
-- least and the most the evidence allows, for all cohorts and for the customer cohort (scope): what the
-- headline prints (headline.sql, the report's exclusion_totals), each count once.
-- A room's row (response_overlap) and a record's row (overlap_records) are one response only where the
-- room served that record's request: a record is served in one room and a room serves one request, so
-- the pairs that are one response form a matching between the rooms and the records each may be (a
-- record whose decode node is known, a room on that node; one whose node is unknown, any room). The most
-- rows that can be one response with another is the largest such matching: per decode node, as many of
-- its rooms as it has records (those records no other node's rooms may be), then the rooms left over
-- with the records whose node is unknown. Each pair in it leaves one response fewer than rows, so:
-- - responses: at most every row distinct, at least the rows less that matching (merges);
-- - confirmed: a pair of a confirmed room and a confirmed record is one confirmed response, and in the
--   customer scope, a confirmed room that is an excluded cohort's record is no customer's: at most the
--   confirmed rows, at least those less the largest matching of confirmed rooms with such records;
-- - indeterminate: a pair with an indeterminate side leaves one indeterminate response fewer (the stronger
--   status wins): at most the indeterminate rows, at least those less the merges (every pair counted, a
--   bound never above the truth).
-- A room's row is the customer cohort's (its account unknown), and one that is an excluded cohort's
-- record counts there: in the customer scope each pair leaves one customer response fewer too.
-- grain: scope (all, customer); reads: affected_responses, response_overlap, overlap_records; params: none
-- scratch: overlap_records
CREATE OR REPLACE TABLE response_bounds AS
WITH scopes AS (SELECT unnest(['all', 'customer']) AS scope
), rows_ AS (  -- each response row once (a request id in two gateway records counts once), as the headline
                -- counts them: confirmed where a row is (of the customer cohort, in its scope)
    SELECT request_id, bool_or(cohort = 'customer') AS customer, bool_or(status = 'confirmed') AS confirmed,
           bool_or(cohort = 'customer' AND status = 'confirmed') AS customer_confirmed
    FROM affected_responses GROUP BY request_id
), counted AS (
    SELECT s.scope, count(r.request_id) AS responses,
           count(r.request_id) FILTER (WHERE CASE s.scope WHEN 'all' THEN r.confirmed ELSE r.customer_confirmed END)
             AS confirmed
    FROM scopes s LEFT JOIN rows_ r ON s.scope = 'all' OR r.customer GROUP BY s.scope
), rooms AS (  -- the rooms' rows each pairing counts, per scope: merges (every room), confirmed (confirmed rooms)
    SELECT s.scope, k.kind, o.node
    FROM scopes s, response_overlap o, (SELECT unnest(['merges', 'confirmed']) AS kind) k
    WHERE (s.scope = 'all' OR o.cohort = 'customer') AND (k.kind = 'merges' OR o.status = 'confirmed')
), records AS (  -- the records each pairing counts: merges (every record), confirmed (confirmed ones, and
                 -- in the customer scope an excluded cohort's too)
    SELECT s.scope, k.kind, r.decode_node AS node
    FROM scopes s, overlap_records r, (SELECT unnest(['merges', 'confirmed']) AS kind) k
    WHERE k.kind = 'merges' OR NOT r.indeterminate OR (s.scope = 'customer' AND NOT r.customer)
), room_n AS (
    SELECT scope, kind, node, count(*) AS n FROM rooms GROUP BY ALL
), record_n AS (
    SELECT scope, kind, node, count(*) AS n FROM records GROUP BY ALL
), per_node AS (  -- per decode node: its rooms matched with its own records, and the rooms left over
    SELECT r.scope, r.kind, least(r.n, coalesce(g.n, 0)) AS matched, greatest(r.n - coalesce(g.n, 0), 0) AS left_over
    FROM room_n r LEFT JOIN record_n g ON g.scope = r.scope AND g.kind = r.kind AND g.node = r.node
), matching AS (  -- ... and the rooms left over with the records whose node is unknown
    SELECT p.scope, p.kind, sum(p.matched) + least(sum(p.left_over), any_value(coalesce(u.n, 0))) AS pairs
    FROM per_node p LEFT JOIN record_n u ON u.scope = p.scope AND u.kind = p.kind AND u.node IS NULL
    GROUP BY p.scope, p.kind
)
SELECT c.scope, c.responses, c.responses - coalesce(m.pairs, 0) AS responses_least, c.confirmed,
       c.confirmed - coalesce(k.pairs, 0) AS confirmed_least, c.responses - c.confirmed AS indeterminate,
       greatest(c.responses - c.confirmed - coalesce(m.pairs, 0), 0) AS indeterminate_least
FROM counted c
LEFT JOIN matching m ON m.scope = c.scope AND m.kind = 'merges'
LEFT JOIN matching k ON k.scope = c.scope AND k.kind = 'confirmed'
ORDER BY c.scope;

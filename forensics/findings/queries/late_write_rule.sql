-- The late-write rule from the engine logs alone, on every decode node (the second leak path): an
-- aborted room gave its pages back at its decode transfer failure, and its transfer may land after
-- that, in pages another room holds by then. Every finished room of the node holding pages while the
-- landing may have happened (pre-allocated before its latest moment, decode ended after its earliest)
-- may have received it. Written once here for both readers: late_write_responses (the nodes without
-- page telemetry, where the rule is all there is) and tier_reliability (the nodes with page telemetry,
-- where page events settle what the rule only suspects, which measures it).
-- The landing, on the decode node's clock: node_lifecycle's [t_land_lo, t_land_hi], never before the
-- abort; unknown (no prefill line names the room): from the abort on, without end. A room held pages
-- from its pre-allocation (at the earliest its estimate less its three durations' rounding: the macro
-- alloc_rounding, forensics.engines.sglang) to its decode end (at the latest its line's time plus the
-- line's resolution).
-- The pairs are found by node and time bucket, not by node alone: a join on the node with the times as
-- its filter compares every aborted room with every room of its node (quadratic in the requests). Two
-- spans that meet share a bucket, the later of their first buckets (floor(t / width) is monotonic in t,
-- and a span's buckets run from that of its smaller end to that of its larger): each pair is joined
-- there once, and the rule itself then decides it, so the buckets' width changes the cost, never the
-- rows. The width is the 90th percentile of the spans held, so that most spans take one or two buckets
-- (the rows a span adds are bounded); a span of more than 64 buckets (a landing without end, a room held
-- far longer than most) is joined by its node alone: few, and the rule the same.
-- grain: node, room, aborted room; reads: node_lifecycle; params: none
CREATE OR REPLACE TEMP TABLE late_write_rule AS
WITH landing AS (
    SELECT node, room AS source_room, t_free,
           greatest(t_free, coalesce(t_land_lo, t_free)) AS lo, coalesce(t_land_hi, 'infinity'::DOUBLE) AS hi
    FROM node_lifecycle
    WHERE aborted
), rule AS (  -- the landings the rule keeps
    SELECT node, source_room, lo, hi FROM landing WHERE hi >= t_free
), held AS (  -- the finished rooms, the span each held pages: [a, b]
    SELECT node, room, t_alloc - alloc_rounding() AS a, t_end + res AS b
    FROM node_lifecycle WHERE NOT aborted AND t_alloc - alloc_rounding() IS NOT NULL AND t_end + res IS NOT NULL
), width AS (
    SELECT greatest(coalesce(quantile_cont(abs(b - a), 0.9) FILTER (WHERE isfinite(a) AND isfinite(b)), 1.0),
                    0.001) AS w
    FROM held
), l AS (
    SELECT r.*, floor(least(lo, hi) / w.w) AS k0, floor(greatest(lo, hi) / w.w) AS k1 FROM rule r, width w
), v AS (
    SELECT h.*, floor(least(a, b) / w.w) AS k0, floor(greatest(a, b) / w.w) AS k1 FROM held h, width w
), l_side AS (
    SELECT node, source_room, lo, hi, k0, k1,
           coalesce(abs(k0) < 1e15 AND abs(k1) < 1e15 AND k1 - k0 < 64, false) AS narrow FROM l
), v_side AS (
    SELECT node, room, a, b, k0, k1,
           coalesce(abs(k0) < 1e15 AND abs(k1) < 1e15 AND k1 - k0 < 64, false) AS narrow FROM v
), l_in AS (
    SELECT node, source_room, lo, hi, CAST(k0 AS BIGINT) AS k0,
           unnest(range(CAST(k0 AS BIGINT), CAST(k1 AS BIGINT) + 1)) AS k
    FROM l_side WHERE narrow
), v_in AS (
    SELECT node, room, a, b, CAST(k0 AS BIGINT) AS k0, unnest(range(CAST(k0 AS BIGINT), CAST(k1 AS BIGINT) + 1)) AS k
    FROM v_side WHERE narrow
)
SELECT l.node, v.room, l.source_room, l.lo, l.hi
FROM l_in l JOIN v_in v ON v.node = l.node AND v.k = l.k
WHERE l.k = greatest(l.k0, v.k0) AND v.room <> l.source_room AND v.a <= l.hi AND v.b >= l.lo
UNION ALL  -- a landing of many buckets, with every finished room of its node
SELECT l.node, v.room, l.source_room, l.lo, l.hi
FROM l_side l JOIN v_side v ON v.node = l.node
WHERE NOT l.narrow AND v.room <> l.source_room AND v.a <= l.hi AND v.b >= l.lo
UNION ALL  -- a room held over many buckets, with every landing of few buckets on its node
SELECT l.node, v.room, l.source_room, l.lo, l.hi
FROM l_side l JOIN v_side v ON v.node = l.node
WHERE l.narrow AND NOT v.narrow AND v.room <> l.source_room AND v.a <= l.hi AND v.b >= l.lo;

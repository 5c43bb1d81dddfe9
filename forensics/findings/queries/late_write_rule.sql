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
-- grain: node, room, aborted room; reads: node_lifecycle; params: none
CREATE OR REPLACE TEMP TABLE late_write_rule AS
WITH landing AS (
    SELECT node, room AS source_room, t_free,
           greatest(t_free, coalesce(t_land_lo, t_free)) AS lo, coalesce(t_land_hi, 'infinity'::DOUBLE) AS hi
    FROM node_lifecycle
    WHERE aborted
)
SELECT l.node, v.room, l.source_room, l.lo, l.hi
FROM landing l JOIN node_lifecycle v ON v.node = l.node AND NOT v.aborted AND v.room <> l.source_room
WHERE l.hi >= l.t_free AND v.t_alloc - alloc_rounding() <= l.hi AND v.t_end + v.res >= l.lo;

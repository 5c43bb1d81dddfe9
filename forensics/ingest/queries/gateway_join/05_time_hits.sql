-- Step 5 of gateway_join: makes time_hits, for each record whose ids name no room (LiteLLM logs a failure
-- under its own litellm_call_id, which no engine saw), the engine requests it may be: the rooms no
-- gateway record names and no id joined, that agree with it on
-- - the model: a room on a node the record's model ran on in the id-joined records (any node when they
--   show none: the gateway's model name and the engine's model path need not be alike);
-- - the time: every line of the room (and every entry time room_lines derives) lies after the record's
--   start on the gateway clock, the earliest of them before the record's end (the engines got the
--   request before the gateway logged its end; an abort's own line may come after), and for a successful
--   record the last one too, each moved by its node's bounds (gateway_clock) and its resolution;
-- - the prompt length: the record's prompt_tokens equal to the room's input length where the record is a
--   success (the count is the engine's own usage), within $len_rel of it (at least $len_abs tokens) where it
--   is a failure (LiteLLM counts a failure's messages with its own tokenizer: an estimate); unknown, so not
--   compared, where the record logs none (0 or empty).
-- A room with no line on a bounded node cannot be placed in time: it is a candidate of every record its
-- length allows (placed false), so it never leaves a record a single candidate by default.
-- A row is a pair that agrees in model and time; length_ok: in prompt length too (the record's
-- candidates), length_used: the length was compared (else the match is by time alone); length_near: the
-- lengths are within a factor $len_far of each other (a failure's estimate by another tokenizer is never
-- further off: every prompt that is not several times longer or shorter). A room that agrees in time and
-- near in length with two records is contested and is joined to neither (gateway_joined): the room of an
-- aborted request agrees so with its own record (its lines and window agree, its estimate is near even
-- where the tolerance misses it), so a record that reached no engine (a 400 or 503) takes another's
-- room only where that room's own record is missing from the gateway log.
-- The pairs are found by time bucket: a range join of every pending record with every unclaimed room
-- compares each record with the rooms of every later window (quadratic in the requests).
-- grain: pending record x room that agrees in model and time; reads: join_hits, gateway, room_lines, gateway_clock;
--        params: gw_slack_us, len_abs, len_rel, len_far
CREATE OR REPLACE TEMP TABLE time_hits AS
WITH claimed AS (
    SELECT bootstrap_room AS room FROM gateway WHERE bootstrap_room IS NOT NULL
    UNION SELECT room FROM join_hits WHERE rooms = 1
), model_nodes AS (  -- the nodes each gateway model ran on, as the id-joined records show
    SELECT DISTINCT coalesce(g.model, '') AS model, l.node
    FROM join_hits j JOIN gateway g USING (file_id, row) JOIN room_lines l ON l.room = j.room
    WHERE j.rooms = 1
), node_span AS (  -- each unclaimed room on each node, its lines moved onto the gateway clock
    SELECT l.room, l.node, max(l.input_len) AS input_len,
           min(l.t_us) - c.hi_us AS first_lo, min(l.t_us + l.res_us) - c.lo_us AS first_hi,
           max(l.t_us) - c.hi_us AS last_lo, coalesce(c.consistent, false) AS placed
    FROM room_lines l LEFT JOIN gateway_clock c USING (node)
    WHERE l.room NOT IN (SELECT room FROM claimed)
    GROUP BY l.room, l.node, c.lo_us, c.hi_us, c.consistent
), rooms AS MATERIALIZED (
    SELECT room, max(input_len) AS input_len, bool_or(placed) AS placed,
           min(first_lo) FILTER (WHERE placed) AS first_lo, min(first_hi) FILTER (WHERE placed) AS first_hi,
           max(last_lo) FILTER (WHERE placed) AS last_lo, list(DISTINCT node) AS nodes
    FROM node_span GROUP BY room
), pending AS MATERIALIZED (
    SELECT j.file_id, j.row, coalesce(g.model, '') AS model, g.status BETWEEN 200 AND 299 AS ok,
           nullif(g.prompt_tokens, 0) AS prompt, epoch_us(g.ts) - $gw_slack_us AS gs,
           epoch_us(g.ts) + CAST(round(g.duration_ms * 1000) AS BIGINT) + 2 * $gw_slack_us AS ge
    FROM join_hits j JOIN gateway g USING (file_id, row) WHERE j.rooms = 0
), width AS (  -- the time buckets' width (microseconds)
    SELECT greatest(coalesce(quantile_disc(ge - gs, 0.9), 1000000), 1000) AS w FROM pending
), rec AS (
    SELECT p.*, least(gs, ge) // w.w AS k0, greatest(gs, ge) // w.w AS k1 FROM pending p, width w
), placed AS (
    SELECT r.*, least(first_lo, first_hi) // w.w AS k0, greatest(first_lo, first_hi) // w.w AS k1
    FROM rooms r, width w WHERE r.placed
), rec_side AS (
    SELECT *, coalesce(k1 - k0 < 64, false) AS narrow FROM rec
), room_side AS (
    SELECT *, coalesce(k1 - k0 < 64, false) AS narrow FROM placed
), rec_in AS (
    SELECT file_id, row, model, ok, prompt, gs, ge, k0, unnest(range(k0, k1 + 1)) AS k FROM rec_side WHERE narrow
), room_in AS (
    SELECT room, input_len, placed, nodes, first_lo, first_hi, last_lo, k0, unnest(range(k0, k1 + 1)) AS k
    FROM room_side WHERE narrow
), pairs AS (
    -- a record's window and a room's first line meet in the later of their first buckets, where this
    -- joins them (each pair once); the rule then decides, so the width changes the cost, never the rows.
    -- The width is the 90th percentile of the windows, so that most take one or two buckets; a span of more
    -- than 64 buckets is joined without them.
    SELECT p.file_id, p.row, p.model, p.ok, p.prompt, p.gs, p.ge, r.room, r.input_len, r.placed, r.nodes
    FROM rec_in p JOIN room_in r ON r.k = p.k
    WHERE p.k = greatest(p.k0, r.k0)
      AND r.first_hi >= p.gs AND r.first_lo <= p.ge AND (NOT p.ok OR r.last_lo <= p.ge)
    UNION ALL
    SELECT p.file_id, p.row, p.model, p.ok, p.prompt, p.gs, p.ge, r.room, r.input_len, r.placed, r.nodes
    FROM (SELECT * FROM rec_side WHERE NOT narrow AND gs IS NOT NULL AND ge IS NOT NULL) p JOIN room_side r
      ON r.first_hi >= p.gs AND r.first_lo <= p.ge AND (NOT p.ok OR r.last_lo <= p.ge)
    UNION ALL
    SELECT p.file_id, p.row, p.model, p.ok, p.prompt, p.gs, p.ge, r.room, r.input_len, r.placed, r.nodes
    FROM (SELECT * FROM rec_side WHERE narrow) p
    JOIN (SELECT * FROM room_side WHERE NOT narrow AND first_lo IS NOT NULL AND first_hi IS NOT NULL) r
      ON r.first_hi >= p.gs AND r.first_lo <= p.ge AND (NOT p.ok OR r.last_lo <= p.ge)
    UNION ALL
    SELECT p.*, r.room, r.input_len, r.placed, r.nodes FROM pending p JOIN rooms r ON NOT r.placed
    UNION ALL  -- a record without an end time: its window is not known
    SELECT p.*, r.room, r.input_len, false, r.nodes FROM pending p JOIN rooms r ON p.ge IS NULL AND r.placed
)
SELECT file_id, row, room, placed, prompt IS NOT NULL AND input_len IS NOT NULL AS length_used,
       prompt IS NULL OR input_len IS NULL
       OR CASE WHEN ok THEN input_len = prompt ELSE abs(input_len - prompt) <= greatest($len_abs, $len_rel * prompt) END
       AS length_ok,
       prompt IS NULL OR input_len IS NULL
       OR CASE WHEN ok THEN input_len = prompt ELSE input_len BETWEEN prompt / $len_far AND prompt * $len_far END
       AS length_near
FROM pairs
WHERE (model NOT IN (SELECT model FROM model_nodes)
       OR EXISTS (SELECT 1 FROM model_nodes m WHERE m.model = pairs.model AND list_contains(pairs.nodes, m.node)));

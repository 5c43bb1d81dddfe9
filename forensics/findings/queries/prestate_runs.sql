-- What each ambiguous landing overwrote: the envelope's runs (prestate_env, from the candidates of
-- prestate_candidates.sql) that found a last writer, with that writer's room.
-- grain: run of an ambiguous landing's slots and its last earlier writer; reads: prestate_env, prestate_candidates; params: none
CREATE OR REPLACE TEMP TABLE prestate_runs AS
SELECT r.item, r.s, r.e, r.w_k, c.w_room FROM prestate_env r
JOIN (SELECT DISTINCT item, k, room AS w_room FROM prestate_candidates) c ON c.item = r.item AND c.k = r.w_k
WHERE r.w_k >= 0

-- The envelope's runs that found a writer (w_k >= 0), with that write's room, key, ambiguity and time:
-- one history round's finds for one chunk of items (forensics.ownership.steps.history).
-- grain: run of an open piece and its last writer; reads: envelope_runs, history_items, history_writes; params: none
INSERT INTO history_found
SELECT r.item, r.s, r.e, w.room, w.k, w.ambiguous, w.ts
FROM envelope_runs r JOIN history_items i USING (item)
JOIN history_writes w ON w.node = i.node AND w.k = r.w_k
WHERE r.w_k >= 0

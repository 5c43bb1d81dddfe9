-- Step 2 of landing_ambiguous: updates transfer_landing.
-- grain: transfer row (the ones made ambiguous); reads: landing_window_pairs, landing_window_hits; params: none
UPDATE transfer_landing SET ambiguous = true
WHERE (sender, xseq) IN (SELECT sender, xseq FROM landing_window_pairs
                         WHERE node = receiver AND v_start < "end" AND v_end > start)
   OR (sender, xseq) IN (SELECT sender, xseq FROM landing_window_hits);

-- A landing is `ambiguous` when a receiver event touching the same slots lies strictly inside its
-- window (seq_lo, seq_hi): then the order of the two is unknown. forensics.ownership.steps.landing's
-- window_hits found those transfers, for windows of any width, in one sweep over each receiver's
-- events; here they are marked.
-- grain: transfer row (the ones made ambiguous); reads: landing_window_hits; params: none
-- scratch: landing_window_hits (made by window_hits for this step)
UPDATE transfer_landing SET ambiguous = true
WHERE (sender, xseq) IN (SELECT sender, xseq FROM landing_window_hits);

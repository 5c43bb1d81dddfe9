-- Part 1's evidence damage block and the brief's line: every loss the evidence shows (evidence_damage).
-- grain: loss of an input (input, kind); reads: evidence_damage; params: none
SELECT input, kind, detail, records_lost, lost_basis FROM evidence_damage
    ORDER BY input, kind, time_from NULLS FIRST, detail

-- evidence_damage.csv: every loss the evidence shows, one row per damaged input (or per loss of one).
-- grain: loss of an input (input, kind); reads: evidence_damage; params: none
SELECT input, source, node, kind, detail, records_lost, lost_basis, time_from, time_to FROM evidence_damage
    ORDER BY input, kind, time_from NULLS FIRST, detail

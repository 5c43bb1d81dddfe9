-- hazards.csv (spec section 6): unsafe page use that exposed nothing (or nothing provable).
-- grain: node, room, kind; reads: hazards; params: none
SELECT node, room, kind, slots, detail FROM hazards ORDER BY node, room, kind

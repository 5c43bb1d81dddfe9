-- Engine hazards that leaked nothing, per node and kind.
-- grain: node, kind; reads: hazards; params: none
SELECT node, kind, count(*) AS rooms, sum(slots)::BIGINT AS slots FROM hazards GROUP BY ALL ORDER BY node, kind;

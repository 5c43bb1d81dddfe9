-- Step 5 of conflict_reads: makes conflict_rooms.
-- grain: node, room, reason; reads: conflict_prov, read_provenance, conflict_own; params: none
CREATE OR REPLACE TABLE conflict_rooms AS
SELECT DISTINCT node, room, reason FROM (
    SELECT r.node, r.room, h.reason FROM conflict_prov h JOIN read_provenance r ON r.rowid = h.prov_row
    UNION ALL
    SELECT node, room, reason FROM conflict_own
);

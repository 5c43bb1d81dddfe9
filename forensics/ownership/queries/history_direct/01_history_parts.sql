-- The last-writer lookup when the screening pass ran (forensics.screen): it walked every write of
-- the node in order and recorded, for each read it flagged, the last write over every run of the
-- read's slots (screen_prov). Each item (history_items.sql) is cut into pieces along those runs.
-- Every item is covered by the runs of its read (a screened read is flagged whenever the replay makes
-- an item of it); history_check verifies it.
-- grain: item piece; reads: history_items, screen_prov, page_events, timeline_xfer; params: none
-- scratch: history_parts
CREATE OR REPLACE TEMP TABLE history_parts AS
SELECT i.item, i.node, greatest(p.s, i.s) AS s, least(p.e, i.e) AS e, p.w_k
FROM history_items i JOIN screen_prov p ON p.node = i.node AND p.k = i.k AND p.s < i.e AND p.e > i.s;

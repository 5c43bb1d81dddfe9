-- The good rows of a staged JSON-lines page-event file (pages_stage less the rows page_events_validate
-- rejected), copied into page_events_text under file $file_id.
-- grain: page event of a text file; reads: pages_stage, rejected; params: $file_id
INSERT INTO page_events_text
SELECT node, seq, ts, op, room, start, "end", nullif(peer, ''), nullif(src, ''), $file_id, row
FROM pages_stage WHERE row NOT IN (SELECT row FROM rejected WHERE file_id = $file_id AND row IS NOT NULL)

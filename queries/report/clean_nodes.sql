-- Negative findings: nodes with page telemetry and no lost events where no exposure was read and no
-- request's events were flagged undecidable: verified clean for the window their events cover.
-- grain: node; reads: coverage, page_events, exposures, room_flags, missing_rooms; params: none
SELECT c.node, c.role, c.responses_served, c.page_events, min(p.ts) AS events_from, max(p.ts) AS events_to
FROM coverage c JOIN page_events p USING (node)
WHERE c.page_telemetry = 'yes' AND c.seq_gaps = 0
  AND c.node NOT IN (SELECT node FROM exposures)
  AND c.node NOT IN (SELECT node FROM room_flags)
  AND c.node NOT IN (SELECT node FROM missing_rooms)
GROUP BY ALL ORDER BY c.node;

-- Negative findings: nodes with page telemetry and no lost events where no exposure was read and no
-- request's events were flagged undecidable: verified clean for the window their events cover.
-- grain: node; reads: coverage, telemetry_nodes (first and last event stamps), exposures, room_flags,
--        missing_rooms; params: none
SELECT c.node, c.role, c.responses_served, c.page_events, p.first_ts AS events_from, p.last_ts AS events_to
FROM coverage c JOIN telemetry_nodes p USING (node)
WHERE c.page_telemetry = 'yes' AND c.seq_gaps = 0
  AND c.node NOT IN (SELECT node FROM exposures)
  AND c.node NOT IN (SELECT node FROM room_flags)
  AND c.node NOT IN (SELECT node FROM missing_rooms)
ORDER BY c.node;

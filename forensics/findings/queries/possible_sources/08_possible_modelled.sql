-- Possible sources, the modelled pairs: the possible pairs some replay of the allocator model found (hits > 0),
-- with their likelihood: the only pairs the likely subset (is_likely) can hold, few beside the windows'
-- pairs, so the likely counts read them here instead of expanding the view possible_sources. source_room:
-- the source's room, which counts a source whose request is unknown (source_key).
-- grain: recipient request, source request, node; reads: source_likelihood, likelihood_map, possible_windows,
--        possible_pool, possible_extra; params: none
CREATE OR REPLACE TABLE possible_modelled AS
WITH found AS (
    SELECT r.recipient_request_id, coalesce(s.request_id, '') AS source_request_id, r.recipient_account_id,
           s.account_id AS source_account_id, r.node, r.recipient_cohort, s.cohort AS source_cohort, l.hits,
           l.source_room
    FROM source_likelihood l
    JOIN possible_windows r ON r.node = l.node AND r.recipient_room = l.recipient_room
    JOIN possible_pool s ON s.node = l.node AND s.room = l.source_room
    WHERE l.hits > 0 AND s.request_id IS DISTINCT FROM r.recipient_request_id
      AND possible_pair(s.started, s.gone_at, r.started, r.finished)
    UNION ALL
    SELECT x.recipient_request_id, x.source_request_id, x.recipient_account_id, x.source_account_id, x.node,
           x.recipient_cohort, x.source_cohort, l.hits, x.source_room
    FROM possible_extra x
    JOIN source_likelihood l ON l.node = x.node AND l.recipient_room = x.recipient_room AND l.source_room = x.source_room
    WHERE l.hits > 0
)
SELECT f.*, round(greatest(m.likelihood, 0.001), 3) AS likelihood
FROM found f LEFT JOIN likelihood_map m ON m.node = f.node AND m.hits = f.hits;

-- Content matches (issue #33): for every response with possible sources (possible_sources: a response
-- without page evidence), the candidate sources whose prompt or response shares rare text with its
-- response, from the fingerprints of the gateway's text (content_fingerprints: 64-bit hashes of
-- 4-word shingles with their word offsets, forensics.ingest.content; never the text). A response decoded
-- over another request's KV tends to echo it.
--   rare: a fingerprint held by at most 8 requests (either side; a request logged twice counts once).
--     System prompts, templates and boilerplate are held by many more and say nothing of a pair.
--   the recipient's own prompt: fingerprints in it are left out of its response's (echoing one's own
--     prompt is what a response does).
--   The join is on the hash, over rare fingerprints only: each costs at most 8 x 8 pairs, so the step is
--     linear in the fingerprints, never recipients x candidates; only then are pairs kept that
--     possible_sources would list (the possible_pair rule: a content match never adds a source the
--     logs rule out).
--   origin: a fingerprint several candidates of one recipient hold counts only for the one the gateway
--     received first (the others echo the same text: responses decoded over the same source's KV).
-- shared: distinct rare fingerprints the recipient's response shares with the source (its prompt or
-- response). content_match: shared >= 3, measured on simulated incidents (benchmarks/content_eval.py,
-- two seeds, echoes of 12 to 24 words with a tenth replaced): without echoes a chance match of 1 shared
-- fingerprint occurs, of 3 none; with echoes, 3 keeps precision 0.97 to 1.00 and finds 0.91 to 0.98 of
-- the echoed pairs (2: the same precision, 0.95 to 1.00; 1: precision down to 0.79). Below 3 the pair
-- stays listed here with content_match false.
-- response_spans, source_spans: the matched runs as word offsets [a, b) of the texts, ';'-separated,
-- the source's prefixed by the side ("prompt:3-21;response:40-52"); source_side: prompt, response or both.
-- checked: the recipient's sources are proven by page events (a confirmed exposure), and its candidates
-- are every request the gateway sent to its decode node: these rows measure the matching against the
-- page evidence (content_tier), they are no possible sources.
-- grain: recipient request, source request, node; reads: content_fingerprints, gateway, possible_windows,
--        possible_pool, possible_extra, exposures; params: none
CREATE OR REPLACE TABLE content_matches AS
WITH fp AS (
    SELECT DISTINCT g.request_id, c.side, c.pos, c.h
    FROM content_fingerprints c JOIN gateway g ON g.file_id = c.file_id AND g.row = c.row
), rare AS (
    SELECT h FROM fp GROUP BY h HAVING count(DISTINCT request_id) BETWEEN 2 AND 8
), rare_fp AS (
    SELECT f.* FROM fp f SEMI JOIN rare r ON r.h = f.h
), checked AS (  -- responses whose sources page events prove: the same matching, scored against them
    SELECT DISTINCT recipient_request_id, node FROM exposures WHERE status = 'confirmed'
      AND recipient_request_id NOT IN (SELECT recipient_request_id FROM possible_windows)
), recipients AS (  -- the responses with possible sources, and the checked ones
    SELECT recipient_request_id FROM possible_windows UNION SELECT recipient_request_id FROM possible_extra
    UNION SELECT recipient_request_id FROM checked
), response AS (  -- the recipients' rare response fingerprints not in their own prompt
    SELECT f.request_id, f.pos, f.h FROM rare_fp f
    WHERE f.side = 'response' AND f.request_id IN (SELECT recipient_request_id FROM recipients)
      AND NOT EXISTS (SELECT 1 FROM rare_fp o WHERE o.request_id = f.request_id AND o.side = 'prompt' AND o.h = f.h)
), collide AS (  -- (recipient, request) pairs that share a rare fingerprint: few, whatever the windows hold
    SELECT DISTINCT r.request_id AS rr, s.request_id AS sr FROM response r JOIN rare_fp s ON s.h = r.h AND s.request_id <> r.request_id
), pairs AS (  -- ... that are possible sources (the rule of the view possible_sources, on these pairs only)
    SELECT w.recipient_request_id, p.request_id AS source_request_id, w.node, w.recipient_account_id,
           p.account_id AS source_account_id
    FROM collide c JOIN possible_windows w ON w.recipient_request_id = c.rr
    JOIN possible_pool p ON p.node = w.node AND p.request_id = c.sr AND NOT coalesce(p.room = w.recipient_room, false)
    WHERE possible_pair(p.started, p.gone_at, w.started, w.finished)
    UNION
    SELECT x.recipient_request_id, x.source_request_id, x.node, x.recipient_account_id, x.source_account_id
    FROM possible_extra x JOIN collide c ON c.rr = x.recipient_request_id AND c.sr = x.source_request_id
    UNION  -- a checked response's candidates: every request the gateway sent to its decode node
    SELECT k.recipient_request_id, g.request_id, k.node, any_value(r.account_id), any_value(g.account_id)
    FROM checked k JOIN collide c ON c.rr = k.recipient_request_id
    JOIN gateway g ON g.request_id = c.sr AND g.decode_node = k.node
    LEFT JOIN gateway r ON r.request_id = k.recipient_request_id
    GROUP BY ALL
), received AS (  -- each request's first gateway time
    SELECT request_id, min(ts) AS ts FROM gateway GROUP BY ALL
), candidate_hits AS (
    SELECT p.recipient_request_id, p.source_request_id, p.node, r.pos AS rpos, s.side, s.pos AS spos, r.h, t.ts
    FROM response r JOIN rare_fp s ON s.h = r.h AND s.request_id <> r.request_id
    JOIN pairs p ON p.recipient_request_id = r.request_id AND p.source_request_id = s.request_id
    LEFT JOIN received t ON t.request_id = s.request_id
), hits AS (  -- a fingerprint counts for the candidates that held it first: a later one holding it is
              -- another echo of the same text (two responses over one source's KV), not its origin
    SELECT * EXCLUDE (ts) FROM candidate_hits
    QUALIFY ts IS NOT DISTINCT FROM min(ts) OVER (PARTITION BY recipient_request_id, node, h)
), marks AS (  -- each matched position, on the response and on the source's side
    SELECT recipient_request_id, source_request_id, node, 'response' AS part, rpos AS pos FROM hits
    UNION SELECT recipient_request_id, source_request_id, node, 'source ' || side, spos FROM hits
), islands AS (  -- one replaced word drops the 4 shingles over it: a gap of more than 5 words splits a run
    SELECT *, sum(CASE WHEN pos - prev <= 5 THEN 0 ELSE 1 END)
                  OVER (PARTITION BY recipient_request_id, source_request_id, node, part ORDER BY pos) AS island
    FROM (SELECT *, lag(pos) OVER (PARTITION BY recipient_request_id, source_request_id, node, part ORDER BY pos)
                    AS prev FROM marks)
), spans AS (
    SELECT recipient_request_id, source_request_id, node, part, min(pos) AS a, max(pos) + 4 AS b
    FROM islands GROUP BY ALL
), texts AS (
    SELECT recipient_request_id, source_request_id, node,
           string_agg(CASE WHEN part = 'response' THEN a || '-' || b END, ';' ORDER BY a) AS response_spans,
           string_agg(CASE WHEN part <> 'response' THEN substr(part, 8) || ':' || a || '-' || b END, ';'
                      ORDER BY part, a) AS source_spans,
           CASE WHEN count(DISTINCT part) FILTER (WHERE part <> 'response') = 2 THEN 'both'
                ELSE substr(max(part) FILTER (WHERE part <> 'response'), 8) END AS source_side
    FROM spans GROUP BY ALL
), shared AS (
    SELECT recipient_request_id, source_request_id, node, count(DISTINCT h) AS shared FROM hits GROUP BY ALL
)
SELECT s.recipient_request_id, s.source_request_id, p.recipient_account_id, p.source_account_id, s.node,
       s.shared, s.shared >= 3 AS content_match, t.source_side, t.response_spans, t.source_spans,
       s.recipient_request_id IN (SELECT recipient_request_id FROM checked) AS checked
FROM shared s JOIN texts t USING (recipient_request_id, source_request_id, node)
JOIN pairs p USING (recipient_request_id, source_request_id, node)
ORDER BY ALL;

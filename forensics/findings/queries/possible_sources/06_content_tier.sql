-- Possible sources, content_tier (one row): what the bundle's own page evidence measured of the content
-- matching. On the checked responses (sources proven by page events, candidates every request sent to
-- their decode node) a content match is right when page events prove the pair (exposures). The content
-- tier is printed where that precision reaches 0.8 on at least 20 proven pairs with text on both sides;
-- else the matches are listed (content_matches.csv, possible_sources.basis) and not counted.
-- grain: one row; reads: content_matches, exposures, content_fingerprints, gateway; params: none
CREATE OR REPLACE TABLE content_tier AS
WITH texts AS (
    SELECT DISTINCT g.request_id, c.side FROM content_fingerprints c JOIN gateway g ON g.file_id = c.file_id AND g.row = c.row
), proven AS (  -- the pairs page events prove among the checked responses, with text on both sides
    SELECT DISTINCT e.recipient_request_id, e.source_request_id FROM exposures e
    WHERE e.status = 'confirmed' AND e.recipient_request_id IN (SELECT recipient_request_id FROM content_matches WHERE checked)
      AND e.recipient_request_id IN (SELECT request_id FROM texts WHERE side = 'response')
      AND e.source_request_id IN (SELECT request_id FROM texts)
), matched AS (
    SELECT DISTINCT recipient_request_id, source_request_id FROM content_matches WHERE checked AND content_match
), m AS (
    SELECT (SELECT count(*) FROM matched) AS matched, (SELECT count(*) FROM proven) AS proven,
           (SELECT count(*) FROM matched SEMI JOIN proven USING (recipient_request_id, source_request_id)) AS hit,
           (SELECT count(*) FROM content_matches WHERE content_match AND NOT checked) AS possible_matches
)
SELECT possible_matches, proven AS measured_true_pairs, matched AS measured_matches,
       CASE WHEN matched > 0 THEN round(hit / matched, 3) END AS measured_precision,
       CASE WHEN proven > 0 THEN round(hit / proven, 3) END AS measured_recall,
       proven >= 20 AND matched > 0 AND hit / matched >= 0.8 AS printed,
       CASE WHEN possible_matches = 0 THEN NULL
            WHEN proven < 20 THEN 'no page evidence with text here measures the content matching (' || proven
                 || ' proven pairs with text, 20 needed): the matches are listed, not counted'
            WHEN matched = 0 OR hit / matched < 0.8 THEN 'the content matching''s measured precision is '
                 || coalesce(round(hit / nullif(matched, 0), 2)::VARCHAR, 'undefined')
                 || ' on the page-proven pairs (0.8 needed): the matches are listed, not counted'
            ELSE 'measured precision ' || round(hit / matched, 2) || ' and recall ' || round(hit / proven, 2)
                 || ' of the content matching against ' || proven || ' page-proven pairs with text'
       END AS reason
FROM m;

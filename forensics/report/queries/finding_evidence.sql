-- Every findings row a notice can cite, with a stable id and the evidence lines behind it: one row per row
-- of affected_responses (finding_file affected_responses.csv) and of exposures (exposures.csv). The id is
-- a digest of the row's grain (affected_responses: request_id; exposures: recipient, source, node, kind,
-- rooms and accounts), so the same finding has the same id in every run that finds it, whatever else
-- changes. evidence_refs: bundle-relative file:line of the lines it rests on, ';'-separated, the first
-- refs (EVIDENCE_REFS) by file and line (evidence_count: how many there are): the gateway records of its
-- requests (the account, the response); for page evidence the node's page events that make each exposed
-- range (the recipient's read, the writer's write or the transfer that landed, the recipient's
-- allocation of the slots); for a signature the engine lines of its room on its decode and prefill node.
-- The notices cite the ids (forensics.report.evidence), `forensics pack` writes the table as evidence.csv.
-- grain: finding_id; reads: affected_responses, exposures, read_provenance, write_effects, page_events,
--   timeline_xfer, engine_requests, gateway, files; params: refs
CREATE OR REPLACE TABLE finding_evidence AS
WITH ar AS (
    SELECT 'ar-' || left(sha256(concat_ws(chr(31), 'affected_responses', coalesce(request_id, ''))), 16) AS finding_id,
           request_id, room, decode_node, prefill_node, evidence
    FROM affected_responses
), ex AS (
    SELECT 'ex-' || left(sha256(concat_ws(chr(31), 'exposures', coalesce(recipient_request_id, ''),
               coalesce(source_request_id, ''), coalesce(node, ''), coalesce(kind, ''),
               coalesce(CAST(recipient_room AS VARCHAR), ''), coalesce(CAST(source_room AS VARCHAR), ''),
               coalesce(recipient_account_id, ''), coalesce(source_account_id, ''))), 16) AS finding_id,
           recipient_request_id, source_request_id, node, kind, recipient_room, source_room
    FROM exposures
), pairs AS (  -- each foreign range a room met on a node: the keys of the events that make it
    SELECT node, room, w_room AS writer, kind, k, w_k, a_k FROM read_provenance WHERE cls = 'foreign'
    UNION ALL
    SELECT node, attending_room, room, 'foreign_write', k, r_k, NULL FROM write_effects
    WHERE attending_room IS NOT NULL AND attending_room <> room
), keys AS (  -- one row per (node, room, writer, kind, event key)
    SELECT DISTINCT node, room, writer, kind, unnest([k, w_k, a_k]) AS key FROM pairs
), own AS (  -- the node's own events: their seq is in the key
    SELECT k.node, k.room, k.writer, k.kind, p.file_id, p.row
    FROM keys k JOIN page_events p ON p.node = k.node AND p.seq = key_seq(k.key)
    WHERE k.key IS NOT NULL AND NOT is_landed(k.key)
), landed AS (  -- a transfer that landed on the node: the sender's transfer event
    SELECT k.node, k.room, k.writer, k.kind, p.file_id, p.row
    FROM keys k  -- timeline_xfer: the landed transfers by the name every execution gives them
    JOIN timeline_xfer x ON x.node = k.node AND x.pos = key_pos(k.key) AND x.sub = key_sub(k.key)
    JOIN page_events p ON p.node = x.sender AND p.seq = x.xseq
    WHERE k.key IS NOT NULL AND is_landed(k.key)
), page_lines AS (
    SELECT * FROM own UNION SELECT * FROM landed
), gw AS (
    SELECT request_id, file_id, row FROM gateway
), refs AS (
    SELECT e.finding_id, p.file_id, p.row AS line
    FROM ex e JOIN page_lines p ON p.node = e.node AND p.room = e.recipient_room AND p.writer = e.source_room
        AND p.kind = e.kind
    UNION
    SELECT e.finding_id, g.file_id, g.row FROM ex e JOIN gw g ON g.request_id IN (e.recipient_request_id, e.source_request_id)
    UNION
    SELECT a.finding_id, p.file_id, p.row
    FROM ar a JOIN page_lines p ON a.evidence = 'pages' AND p.node = a.decode_node AND p.room = a.room
    UNION
    SELECT a.finding_id, r.file_id, r.line
    FROM ar a JOIN engine_requests r ON a.evidence = 'signature' AND r.room = a.room
        AND r.node IN (a.decode_node, a.prefill_node)
    UNION
    SELECT a.finding_id, g.file_id, g.row FROM ar a JOIN gw g ON g.request_id = a.request_id
), ranked AS (
    SELECT r.finding_id, f.path, r.line, row_number() OVER (PARTITION BY r.finding_id ORDER BY f.path, r.line) AS rank
    FROM refs r JOIN files f USING (file_id)
), cited AS (
    SELECT finding_id, count(*) AS evidence_count,
           string_agg(path || ':' || line, ';' ORDER BY path, line) FILTER (WHERE rank <= $refs) AS evidence_refs
    FROM ranked GROUP BY finding_id
)
SELECT finding_id, 'affected_responses.csv' AS finding_file, request_id, NULL::VARCHAR AS source_request_id,
       decode_node AS node, NULL::VARCHAR AS kind, evidence, coalesce(evidence_count, 0) AS evidence_count,
       coalesce(evidence_refs, '') AS evidence_refs
FROM ar LEFT JOIN cited USING (finding_id)
UNION ALL
SELECT finding_id, 'exposures.csv', recipient_request_id, source_request_id, node, kind, 'pages',
       coalesce(evidence_count, 0), coalesce(evidence_refs, '')
FROM ex LEFT JOIN cited USING (finding_id)
ORDER BY finding_file, request_id, source_request_id, node, kind, finding_id;

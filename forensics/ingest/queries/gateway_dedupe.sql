-- Gateway records logged twice: every field equal to an earlier record's (by file, then row). The
-- first stays; the repeats are rejected (they would count one client request twice: its exposed
-- slots, its rows in the findings, the cohort totals).
-- grain: one rejected row per repeated record; reads: gateway, repeated_hashes; params: none
-- Records that share a request_id but differ in any field are kept: both are evidence, and the
-- findings count the request once (exposures.sql, affected_responses.sql). Runs only when
-- forensics.ingest.gateway found request_id hashes that repeat (registered as `repeated_hashes`).
CREATE OR REPLACE TEMP TABLE gateway_dups AS
WITH ranked AS (
    SELECT g.request_id, g.file_id, g.row,
           row_number() OVER w AS k, first_value(g.file_id) OVER w AS first_file, first_value(g.row) OVER w AS first_row
    FROM gateway g
    WHERE hash(g.request_id) IN (SELECT h FROM repeated_hashes)
    WINDOW w AS (PARTITION BY g.request_id, g.ts, g.account_id, g.api_token_id, g.client_ip, g.user_agent, g.model,
                              g.status, g.prompt_tokens, g.completion_tokens, g.duration_ms, g.bootstrap_room,
                              g.prefill_node, g.decode_node, g.headers
                 ORDER BY g.file_id, g.row)
)
SELECT request_id, file_id, row, first_file, first_row FROM ranked WHERE k > 1;

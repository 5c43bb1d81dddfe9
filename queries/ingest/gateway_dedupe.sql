-- Gateway records logged twice: every field equal to an earlier record's (by file, then row). The
-- first stays; the repeats are rejected (they would count one client request twice: its exposed
-- slots, its rows in the findings, the cohort totals).
-- grain: one rejected row per repeated record; reads: gateway; params: none
-- Records that share a request_id but differ in any field are kept: both are evidence, and the
-- findings count the request once (exposures.sql, affected_responses.sql). Runs only when
-- forensics.ingest.gateway found a repeated request_id hash; candidates by that hash again.
CREATE OR REPLACE TEMP TABLE gateway_dups AS
WITH repeated AS (
    SELECT hash(request_id) AS h FROM gateway GROUP BY 1 HAVING count(*) > 1
), ranked AS (
    SELECT g.request_id, g.file_id, g.row,
           row_number() OVER w AS k, first_value(g.file_id) OVER w AS first_file, first_value(g.row) OVER w AS first_row
    FROM gateway g
    WHERE hash(g.request_id) IN (SELECT h FROM repeated)
    WINDOW w AS (PARTITION BY g.request_id, g.ts, g.account_id, g.api_token_id, g.client_ip, g.user_agent, g.model,
                              g.status, g.prompt_tokens, g.completion_tokens, g.duration_ms, g.bootstrap_room,
                              g.prefill_node, g.decode_node, g.headers
                 ORDER BY g.file_id, g.row)
)
SELECT request_id, file_id, row, first_file, first_row FROM ranked WHERE k > 1;

-- The printed responses' provenance, merged into slot ranges: adjacent segments (prov_stale,
-- prov_foreign) with the same read, writer, transfer and free history become one [start, end)
-- range. Ranges are numbered per response, stale ones first, by slot; the report prints the first
-- few and counts the rest.
-- grain: request_id, rn; reads: prov_stale_rows, prov_foreign_rows; params: none
-- scratch: prov_stale_rows, prov_foreign_rows (prov_stale's and prov_foreign's, merged here)
CREATE OR REPLACE TEMP TABLE prov_merged AS
WITH segs AS (
    SELECT 0 AS kind_order, 'stale' AS kind, node, seg_start, seg_end, read_ts, read_start, read_end, source_room,
           source_request_id, source_account_id, source_cohort, write_op, write_src, write_sender, write_ts,
           write_ts_hi, free_room, free_ts, alloc_ts, request_id
    FROM prov_stale_rows
    UNION ALL
    SELECT 1, 'foreign', node, seg_start, seg_end, read_ts, read_start, read_end, source_room,
           source_request_id, source_account_id, source_cohort, write_op, write_src, write_sender, write_ts,
           write_ts_hi, free_room, free_ts, NULL::TIMESTAMPTZ, request_id
    FROM prov_foreign_rows
), ordered AS (
    SELECT *, lag(seg_end) OVER w AS prev_end,
           (lag(node) OVER w, lag(read_ts) OVER w, lag(read_start) OVER w, lag(read_end) OVER w,
            lag(source_room) OVER w, lag(source_request_id) OVER w, lag(source_account_id) OVER w,
            lag(source_cohort) OVER w, lag(write_op) OVER w, lag(write_src) OVER w, lag(write_sender) OVER w,
            lag(write_ts) OVER w, lag(write_ts_hi) OVER w, lag(free_room) OVER w, lag(free_ts) OVER w,
            lag(alloc_ts) OVER w)
           IS NOT DISTINCT FROM
           (node, read_ts, read_start, read_end, source_room, source_request_id, source_account_id,
            source_cohort, write_op, write_src, write_sender, write_ts, write_ts_hi, free_room, free_ts,
            alloc_ts) AS same_history
    FROM segs
    WINDOW w AS (PARTITION BY request_id, kind_order
                 ORDER BY seg_start, seg_end, node, read_ts, source_room, write_ts, free_ts)
), islands AS (
    SELECT *, sum(CASE WHEN prev_end = seg_start AND same_history THEN 0 ELSE 1 END)
              OVER (PARTITION BY request_id, kind_order
                    ORDER BY seg_start, seg_end, node, read_ts, source_room, write_ts, free_ts
                    ROWS UNBOUNDED PRECEDING) AS island
    FROM ordered
), merged AS (  -- the rows of an island share their history: any_value is exact
    SELECT request_id, kind_order, any_value(kind) AS kind, island, min(seg_start) AS seg_start,
           max(seg_end) AS seg_end,
           any_value(node) AS node, any_value(read_ts) AS read_ts, any_value(read_start) AS read_start,
           any_value(read_end) AS read_end, any_value(source_room) AS source_room, any_value(source_request_id) AS source_request_id,
           any_value(source_account_id) AS source_account_id, any_value(source_cohort) AS source_cohort, any_value(write_op) AS write_op,
           any_value(write_src) AS write_src, any_value(write_sender) AS write_sender, any_value(write_ts) AS write_ts,
           any_value(write_ts_hi) AS write_ts_hi, any_value(free_room) AS free_room, any_value(free_ts) AS free_ts,
           any_value(alloc_ts) AS alloc_ts
    FROM islands GROUP BY request_id, kind_order, island
)
SELECT row_number() OVER (PARTITION BY request_id ORDER BY kind_order, seg_start, seg_end, island) AS rn, *
FROM merged;

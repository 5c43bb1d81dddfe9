-- Events seen twice for the same (node, seq): the first (by file, row) stays, the others are rejected.
-- grain: one rejected row per duplicate; reads: page_events; params: none
CREATE OR REPLACE TEMP TABLE page_dups AS
WITH keys AS (
    SELECT node, seq FROM page_events GROUP BY node, seq HAVING count(*) > 1
), ranked AS (
    SELECT p.node, p.seq, p.file_id, p.row,
           row_number() OVER (PARTITION BY p.node, p.seq ORDER BY p.file_id, p.row) AS k,
           first_value(p.file_id) OVER (PARTITION BY p.node, p.seq ORDER BY p.file_id, p.row) AS first_file,
           first_value(p.row) OVER (PARTITION BY p.node, p.seq ORDER BY p.file_id, p.row) AS first_row
    FROM page_events p SEMI JOIN keys USING (node, seq)
)
SELECT * FROM ranked WHERE k > 1;

-- The historical replay window of this run (--since/--until; NULL = open end), with how many page
-- files it left unread and how many page events stamped outside it were set aside.
-- grain: one row; reads: replay_window, files; params: none
SELECT w.since, w."until",
       (SELECT count(*) FROM files WHERE skipped IS NOT NULL) AS files_skipped,
       (SELECT coalesce(sum(rows_outside_window), 0) FROM files)::BIGINT AS rows_outside
FROM replay_window w;

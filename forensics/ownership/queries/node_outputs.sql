-- The rows of one per-node table from every node's task (forensics.ownership.execution.tasks, the files
-- $files), each with its node's base (node_base), by which its node-local ranks and item ids are offset
-- when the table is stored.
-- grain: row of a node task's table; reads: the tasks' Parquet files, task_dirs, node_index; params: $files
SELECT t.*, x.base AS node_base FROM (
    SELECT * EXCLUDE (filename), parse_dirpath(filename) AS dir FROM read_parquet($files, filename = true)) t
JOIN task_dirs d USING (dir) JOIN node_index x ON x.node = d.node

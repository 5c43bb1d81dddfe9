"""The engine logs of the logs-only path, read as Ray tasks by node and time range (investigate
--executor ray).

Ingest's bulk reader (forensics.ingest.bulk.load_engine_files) reads each file on its own terms: a file's
rows, rejects and row counts depend on that file alone (no rule of ingest looks across files: the
overlap a time shard needs here is none). So each node's plain engine files, cut into runs of consecutive
files of at most SHARD_BYTES (for a rotated log, time ranges: a day per file with dateext rotation), are
read by a task of their own, on its own in-memory DuckDB, with the same reader; the task hands back the
tables the reader fills (engine_lines, engine_requests, batch_stats, rejected, and the lines kept for the
config audit) as Arrow tables, with each row's place in its table (`_r`, the task's rowid), the reader's
Python-side rows (node_config's start-up rows, integrity rows, rejected lines) and its files' accounting.
The main process puts them into incident.duckdb in the order the one-process reader leaves them: text
logs before request logs, files in the bundle's order, each file's rows in the task's order (and when the
bundle holds both kinds, engine_requests by file, line and that order, as load_engine_files's reorder
does). The findings are then the one-process run's, byte for byte (tests/ownership/test_ray_logs.py).

A Ray task shares no storage with the main process: each file comes as bytes through the object store,
is written into the task's scratch folder under its own name, and every path the task records (the audit's
kept lines, an error or note naming the file) is given back the bundle's path before it returns.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.audit.sieved import KEPT
from forensics.db import PROFILE, connect, run_query, timed
from forensics.engines.facts import EngineRows
from forensics.ingest import EngineLoader
from forensics.ingest.bulk import load_engine_files
from forensics.intake import InputFile
from forensics.ownership.execution.cluster import on_ray
from forensics.ownership.execution.nodes import Execution, _share, task_threads
from forensics.ownership.execution.tasks import code_digest

# the tables load_engine_files fills, each row carrying its file_id (the order they are put back in)
TABLES = ("engine_lines", "engine_requests", "batch_stats", "rejected")
# the audit's kept lines (forensics.audit.sieved.kept_from): read by file name, in no order of their own
KEPT_TABLES = (KEPT, f"{KEPT}_files")
# most bytes of engine files one task reads: a node's files beyond it are cut into runs of consecutive
# files (for a rotated log, time ranges), each a task of its own; a file is read whole by one task
SHARD_BYTES = 1 << 30


@dataclass(frozen=True)
class IngestTask:
    """One node's plain engine files, as load_engine_files reads them; picklable for Ray."""

    node: str
    files: tuple[InputFile, ...]
    tz: ZoneInfo
    memory_limit: str | None
    threads: int


def ingest_node(task: IngestTask) -> dict[str, Any]:
    """load_engine_files on the node's files alone, on a DuckDB of its own; returns what it filled."""
    t0 = time.perf_counter()
    files = [replace(f, notes=list(f.notes), damage=list(f.damage)) for f in task.files]
    con = connect(":memory:", memory_limit=task.memory_limit, threads=task.threads)
    try:
        run_query(con, "ingest", "schema")
        rows = EngineRows()
        load_engine_files(con, files, task.tz, rows)
        tables = {t: con.sql(f"SELECT *, rowid AS _r FROM {t}").to_arrow_table() for t in TABLES}
        have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
        tables |= {t: con.sql(f"SELECT * FROM {t}").to_arrow_table() for t in KEPT_TABLES if t in have}
    finally:
        con.close()
    return {
        "node": task.node,
        "files": files,
        "config": rows.config,
        "integrity": rows.integrity,
        "rejected": rows.rejected,
        "tables": tables,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def ingest_node_on_ray(task: IngestTask, code: str, *blobs: bytes) -> dict[str, Any]:
    """ingest_node on a Ray worker: the files' bytes (`blobs`, in the task's file order) written into a
    scratch folder, the bundle's paths given back to whatever the reader recorded of them."""
    import ray

    where = {"node": task.node, "ray_node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}
    own = code_digest()
    if own != code:
        return {**where, "code": own}
    with tempfile.TemporaryDirectory(prefix="kvf-ingest-") as tmp:
        local = []
        for f, data in zip(task.files, blobs, strict=True):
            path = Path(tmp) / str(f.file_id) / f.path.name
            path.parent.mkdir()
            path.write_bytes(data)
            local.append(replace(f, path=path))
        result = ingest_node(replace(task, files=tuple(local)))
    back = {str(mine.path): str(f.path) for mine, f in zip(local, task.files, strict=True)}
    result["files"] = [_own_paths(g, f, back) for g, f in zip(result["files"], task.files, strict=True)]
    for name in KEPT_TABLES:
        if name in result["tables"]:
            table = result["tables"][name]
            names = [back.get(n, n) for n in table.column("filename").to_pylist()]
            # typed: an empty list would become Arrow's null type, which no other task's table shares
            column = pa.array(names, pa.string())
            result["tables"][name] = table.set_column(table.schema.get_field_index("filename"), "filename", column)
    return {**result, **where, "code": own}


def _own_paths(got: InputFile, sent: InputFile, back: dict[str, str]) -> InputFile:
    """The task's account of a file with the bundle's path in place of the scratch copy's."""

    def mend(text: str) -> str:
        for mine, theirs in back.items():
            text = text.replace(mine, theirs)
        return text

    return replace(
        got, path=sent.path, error=mend(got.error) if got.error else got.error, notes=[mend(n) for n in got.notes]
    )


def engine_loader(execution: Execution) -> EngineLoader:
    """What reads the plain engine files: with --executor ray, the files of each node in a Ray task;
    else load_engine_files, in this process."""
    if execution.executor != "ray":
        return load_engine_files

    def load(con: duckdb.DuckDBPyConnection, files: list[InputFile], tz: ZoneInfo, rows: EngineRows) -> None:
        load_apart(con, files, tz, rows, execution, lambda tasks: _run_ray(tasks, execution))

    return load


def node_tasks(files: Sequence[InputFile], tz: ZoneInfo, execution: Execution) -> list[IngestTask]:
    """The tasks: each node's files in the bundle's order (a rotated log's files by the times they hold),
    cut into runs of at most SHARD_BYTES (a file larger than that is a run of its own); the run's threads
    and memory shared among the tasks run at once (as the ownership stage's node tasks share them)."""
    nodes: dict[str, list[list[InputFile]]] = {}
    for f in files:
        runs = nodes.setdefault(f.node or "", [[]])
        if runs[-1] and sum(g.bytes for g in runs[-1]) + f.bytes > SHARD_BYTES:
            runs.append([])
        runs[-1].append(f)
    shards = [(node, run) for node, runs in nodes.items() for run in runs]
    cores = execution.threads or os.cpu_count() or 1
    workers = max(1, min(execution.workers or cores, len(shards)))
    threads = task_threads(execution.threads, workers)
    memory = _share(execution.memory_limit, workers)
    return [IngestTask(node, tuple(run), tz, memory, threads) for node, run in shards]


def load_apart(
    con: duckdb.DuckDBPyConnection,
    files: list[InputFile],
    tz: ZoneInfo,
    rows: EngineRows,
    execution: Execution,
    run: Callable[[list[IngestTask]], list[dict[str, Any]]],
) -> None:
    """What load_engine_files(con, files, tz, rows) does, each node's files read by a task that `run` runs."""
    if not files:
        return load_engine_files(con, files, tz, rows)
    with timed("ingest/engine_tasks"):
        results = run(node_tasks(files, tz, execution))
    by_id = {f.file_id: f for f in files}
    for r in results:
        for got in r["files"]:
            f = by_id[got.file_id]
            f.rows_read, f.rows_loaded, f.rows_rejected = got.rows_read, got.rows_loaded, got.rows_rejected
            f.error, f.notes, f.damage = got.error, got.notes, got.damage
    # the one-process reader's order: text logs, then request logs, each kind in the bundle's file order
    place = {f.file_id: (0 if f.source == "engine_log" else 1, i) for i, f in enumerate(files)}
    for key in ("config", "integrity"):
        getattr(rows, key).extend(sorted((x for r in results for x in r[key]), key=lambda x: place[x["file_id"]]))
    rows.rejected.extend(sorted((x for r in results for x in r["rejected"]), key=lambda x: place[x[0]]))
    both = len({k for k, _ in place.values()}) == 2  # load_engine_files then reorders engine_requests
    file_order = pa.table(  # noqa: F841 (read by DuckDB)
        {
            "file_id": pa.array(list(place), pa.int32()),
            "_k": pa.array([k for k, _ in place.values()], pa.int32()),
            "_p": pa.array([p for _, p in place.values()], pa.int32()),
        }
    )
    with timed("ingest/engine_tasks_load"):
        for table in TABLES:
            got = pa.concat_tables([r["tables"][table] for r in results])  # noqa: F841 (read by DuckDB)
            cols = ", ".join(f's."{c}"' for c in got.column_names if c != "_r")
            by = "s.file_id, s.line, s._r" if table == "engine_requests" and both else "o._k, o._p, s._r"
            con.execute(f"INSERT INTO {table} SELECT {cols} FROM got s JOIN file_order o USING (file_id) ORDER BY {by}")
        for table in KEPT_TABLES:
            parts = [r["tables"][table] for r in results if table in r["tables"]]
            if parts:
                kept = pa.concat_tables(parts)  # noqa: F841 (read by DuckDB)
                con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} AS SELECT * FROM kept LIMIT 0")
                con.execute(f"INSERT INTO {table} SELECT * FROM kept")
    return None


def _run_ray(tasks: list[IngestTask], execution: Execution) -> list[dict[str, Any]]:
    """Each task on the cluster, its files put into the object store as it is submitted; the results in the
    tasks' order (cluster.on_ray)."""
    workers = max(1, execution.workers or execution.threads or os.cpu_count() or 1)
    results = on_ray(
        ingest_node_on_ray,
        tasks,
        code_digest(),
        lambda ray, task: [ray.put(f.path.read_bytes()) for f in task.files],
        lambda task: f"the engine logs of node {task.node}",
        execution.ray_address,
        workers,
    )
    if PROFILE:
        for r in results:
            print(
                f"[profile]   engine-log task {r['node']} on {r['host']} (Ray node {r['ray_node'][:12]}): "
                f"{len(r['files'])} files, {r['seconds']}s",
                file=sys.stderr,
            )
    return results

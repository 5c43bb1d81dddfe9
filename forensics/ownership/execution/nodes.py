"""Per-node ownership work: one task per node, run in this process, in worker processes, or on Ray.

Everything the ownership stage does after transfers are placed on their receivers' event order is
local to one node: the node's timeline (its own events and the transfers that landed in its pool),
the room replay, holdings, double allocations, foreign writes injected into the rooms they hit, and
the last-writer search. So the main process places transfers (it needs both sides), writes each
node's inputs to Parquet (`<work>/in/<n>/events.parquet`, `landing.parquet`), and a task per node
reads them by path, runs the same SQL and numpy code on its own in-memory DuckDB, and writes its
tables to `<work>/out/<n>/<table>.parquet`. The main process loads them back into incident.duckdb.

A task's tables do not depend on which other nodes exist: event ranks (kg) and history item ids
are node-local in the task and offset by the node's base (node_index) when loaded. That is what
lets `--cache DIR` reuse a node's tables when its inputs are unchanged: the cache key is the
SHA-256 of the input files that hold the node's events, a digest of the transfers placed into it,
and the code version (the query files and this package's modules).

Executors: "process" (default; `workers` processes, 1 = all nodes at once in this process, 0 = auto,
see auto_workers) and "ray" (one Ray task per node: `ray.init(address=...)` if given, else a local
Ray instance). All give identical tables. A Ray task gets its input files as bytes through Ray's object
store and returns its tables as Parquet bytes, which the main process writes where a process task
writes them: the machines of a cluster share no storage, only the same kv-forensics version (the task
checks the code digest it runs against the main process's).

The run's threads (`threads`, investigate --threads; default all cores) and memory limit are shared
among the workers: each task's DuckDB gets its share (task_threads, _share), and so do the compiled
walks, which run in the threads of the task's side_by_side (as many as its DuckDB has).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import duckdb

from forensics.db import PROFILE, default_memory_limit, one, parse_size, scalar, telemetry_node_names, timed
from forensics.ownership.execution.cluster import on_ray
from forensics.ownership.execution.tasks import (
    NodeStage,
    NodeTask,
    code_digest,
    export_inputs,
    load_outputs,
    run_node,
    run_node_on_ray,
)

EXECUTORS = ("process", "ray")


@dataclass(frozen=True)
class Execution:
    """How the per-node work is to run (settings only: what the run decided and measured is its
    NodeRun). workers: 0 = auto (see auto_workers), 1 = all nodes in this process; threads and
    memory_limit: the run's, shared among the workers (None: all cores, half the machine)."""

    executor: str = "process"
    workers: int = 1
    cache: Path | None = None
    workdir: Path | None = None
    memory_limit: str | None = None
    threads: int | None = None
    ray_address: str | None = None
    screen: bool = True  # False: replay every room in detail (investigate --full-replay)


@dataclass
class NodeRun:
    """What run_nodes decided and measured: the replay (screened or full), the worker processes used
    (0 resolved by auto_workers) and, when the nodes ran as tasks, how many ran, how many were reused
    from the cache and each task's own account (run_node's)."""

    replay: str
    workers: int
    nodes: int | None = None
    tasks_run: int | None = None
    reused: int | None = None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    ray_nodes: int | None = None  # distinct Ray nodes that ran tasks (executor ray only)

    @property
    def apart(self) -> bool:
        """Whether the nodes ran as tasks (else all at once on the main connection)."""
        return self.tasks_run is not None

    def manifest(self) -> dict[str, Any]:
        """The manifest's `execution` section (the tasks' own accounts, timings among them, left out)."""
        if not self.apart:
            return {"replay": self.replay}
        section = {
            "replay": self.replay,
            "nodes": self.nodes,
            "tasks_run": self.tasks_run,
            "reused": self.reused,
            "workers": self.workers,
        }
        if self.ray_nodes is not None:
            section["ray_nodes"] = self.ray_nodes
        return section


def _node_key(con: duckdb.DuckDBPyConnection, node: str, code: str, screen: bool) -> str:
    files = [
        r[0]
        for r in con.execute(
            """SELECT DISTINCT f.sha256 FROM page_events e JOIN files f USING (file_id)
               WHERE e.node = ? ORDER BY 1""",
            [node],
        ).fetchall()
    ]
    landing = scalar(
        con,
        """SELECT md5(string_agg(concat_ws('|', sender, xseq, room, start, "end", seq_lo, seq_hi, land_lo, land_hi,
                  ambiguous, conflict, xts), ';' ORDER BY sender, xseq))
           FROM transfer_landing WHERE receiver = ?""",
        [node],
    )
    window = [str(v) for v in one(con, 'SELECT since, "until" FROM replay_window')]
    body = json.dumps(
        {"code": code, "node": node, "files": files, "landing": landing, "window": window, "screen": screen},
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def _run_process(tasks: list[NodeTask], workers: int) -> list[dict[str, Any]]:
    if workers <= 1 or len(tasks) <= 1:
        return [run_node(t) for t in tasks]
    # spawn: a forked child would inherit the parent's DuckDB threads and locks
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        try:
            return list(pool.map(run_node, tasks))
        except BaseException:
            # an interrupted or failed run stops its workers now: the pool's exit would wait for their
            # tasks, which go on writing into the work folder the run's cleanup removes
            for proc in list((pool._processes or {}).values()):
                proc.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _run_ray(tasks: list[NodeTask], address: str | None, workers: int) -> list[dict[str, Any]]:
    """Each node's task on the cluster, its inputs put into the object store as it is submitted; each
    result's tables written where run_node would have written them, as it arrives."""

    def inputs(ray: Any, task: NodeTask) -> list[Any]:
        folder = Path(task.inputs)
        return [ray.put((folder / "events.parquet").read_bytes()), ray.put((folder / "landing.parquet").read_bytes())]

    def keep(task: NodeTask, result: dict[str, Any]) -> dict[str, Any]:
        output = Path(task.output)
        output.mkdir(parents=True, exist_ok=True)
        for table, data in result.pop("tables").items():
            (output / f"{table}.parquet").write_bytes(data)
        return result

    return on_ray(run_node_on_ray, tasks, code_digest(), inputs, lambda t: f"node {t.node}", address, workers, keep)


def run_nodes(con: duckdb.DuckDBPyConnection, stage: NodeStage, execution: Execution) -> NodeRun:
    """Run `stage` for every node with page telemetry and load its tables into `con`; returns what ran."""
    nodes = telemetry_node_names(con)
    cores = execution.threads or os.cpu_count() or 1
    workers = execution.workers or (cores if execution.executor == "ray" else auto_workers(len(nodes), cores))
    run = NodeRun("screened" if execution.screen else "full", workers)
    if not nodes or (execution.executor == "process" and workers == 1 and not execution.cache):
        # one worker: the same steps for all nodes at once on this connection, no Parquet round trip
        stage.run(con, execution.screen)
        return run
    own_tmp = None
    work = execution.workdir
    if work is None:
        own_tmp = tempfile.mkdtemp(prefix="kvf-work-")
        work = Path(own_tmp)
    try:
        _run_all(con, stage, execution, run, nodes, work)
    finally:
        if own_tmp:
            shutil.rmtree(own_tmp, ignore_errors=True)
    return run


def auto_workers(nodes: int, cores: int | None = None) -> int:
    """Worker processes by default: one per node, up to the cores (the run's threads, when it is given
    fewer than the machine has), when there are more than two.
    On two cores DuckDB's own threads already use both, and handing node tables through Parquet costs
    more than the numpy steps gain (measured at 10M events: 126 s in-process, 166 s with 2 workers)."""
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 2 else max(1, min(cores, nodes))


def task_threads(threads: int | None, workers: int) -> int:
    """Each worker's share of the run's threads (default: all cores), at least one."""
    return max(1, (threads or os.cpu_count() or 1) // max(1, workers))


def _run_all(
    con: duckdb.DuckDBPyConnection,
    stage: NodeStage,
    execution: Execution,
    run: NodeRun,
    nodes: list[str],
    work: Path,
) -> None:
    code = code_digest()
    workers = max(1, min(run.workers, len(nodes)))
    threads = task_threads(execution.threads, workers)
    memory_limit = _share(execution.memory_limit, workers)
    outputs: list[tuple[str, Path]] = []
    tasks: list[NodeTask] = []
    reused = 0
    with timed("nodes/export"):
        for i, node in enumerate(nodes):
            key = _node_key(con, node, code, execution.screen) if execution.cache else None
            cached = execution.cache / key if execution.cache and key else None
            if cached is not None and (cached / "done").is_file():
                outputs.append((node, cached))
                reused += 1
                continue
            folder = work / "in" / f"n{i:05d}"
            export_inputs(con, node, folder)
            target = cached if cached is not None else work / "out" / f"n{i:05d}"
            tasks.append(NodeTask(stage, node, str(folder), str(target), memory_limit, threads, execution.screen))
            outputs.append((node, target))
    with timed(f"nodes/run ({len(tasks)} tasks, {execution.executor}, {workers} workers)"):
        if execution.executor == "ray":
            results = _run_ray(tasks, execution.ray_address, workers)
        else:
            results = _run_process(tasks, workers)
    for task in tasks:
        if execution.cache:
            (Path(task.output) / "done").write_text("ok\n")
    with timed("nodes/load"):
        load_outputs(con, stage, outputs)
    if PROFILE:
        for r in results:
            where = f" on {r['host']} (Ray node {r['ray_node'][:12]})" if "ray_node" in r else ""
            print(
                f"[profile]   task {r['node']}{where}: {r['events']} events, {r['seconds']}s {r['steps']}",
                file=sys.stderr,
            )
    run.nodes, run.tasks_run, run.reused, run.workers, run.tasks = len(nodes), len(tasks), reused, workers, results
    if execution.executor == "ray":
        run.ray_nodes = len({r["ray_node"] for r in results})


def _share(memory_limit: str | None, workers: int) -> str | None:
    """Each worker gets an equal share of the memory limit (default: half the machine)."""
    total = parse_size(memory_limit or default_memory_limit())
    if total is None:
        return memory_limit
    return f"{max(64, total // workers >> 20)}MB"

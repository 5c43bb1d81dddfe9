"""A node's task (forensics.ownership.execution.nodes runs them): what it runs (NodeStage), its inputs
exported to Parquet, its run on a connection of its own (run_node; on a Ray worker, run_node_on_ray, with
its inputs and tables as bytes), the code digest that keys the cache and checks a worker's code, and its
tables loaded back into the main database, node-local ranks and item ids offset by the node's base."""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb

import forensics
from forensics.db import connect, ident, run_query, scalar, sql_literal, thread_count
from forensics.paths import load_query, query_files


@dataclass(frozen=True)
class NodeStage:
    """What a node task runs: `run(con, screen)` on a connection holding the node's page_events,
    transfer_landing, node_index and telemetry_nodes; the tables it leaves, each with its columns that
    hold node-local event ranks or item ids (offset by the node's base when loaded); and which of those
    are scratch (loaded back as temp tables: lookups for the findings, not kept in incident.duckdb).
    A top-level function and plain data, so that process pools and Ray can pickle it."""

    run: Callable[[duckdb.DuckDBPyConnection, bool], None]
    tables: dict[str, tuple[str, ...]]
    scratch: tuple[str, ...]


@dataclass(frozen=True)
class NodeTask:
    stage: NodeStage
    node: str
    inputs: str  # folder with events.parquet and landing.parquet
    output: str  # folder the task writes <table>.parquet into
    memory_limit: str | None
    threads: int
    screen: bool = True


def run_node(task: NodeTask) -> dict[str, Any]:
    """One node's ownership work: reads its inputs by path, writes its tables as Parquet. Picklable
    (a top-level function of plain data) so that process pools and Ray can run it."""
    t0 = time.perf_counter()
    out = Path(task.output)
    out.mkdir(parents=True, exist_ok=True)
    con = connect(":memory:", memory_limit=task.memory_limit, threads=task.threads)
    try:
        con.execute(f"SET temp_directory = {sql_literal(out / 'spill')}")
        inp = Path(task.inputs)
        t_load = time.perf_counter()
        con.execute(f"CREATE TABLE page_events AS SELECT * FROM read_parquet({sql_literal(inp / 'events.parquet')})")
        con.execute(
            f"CREATE TABLE transfer_landing AS SELECT * FROM read_parquet({sql_literal(inp / 'landing.parquet')})"
        )
        con.execute("CREATE TABLE node_index (node VARCHAR, base BIGINT)")
        con.execute("INSERT INTO node_index VALUES (?, 0)", [task.node])
        run_query(con, "ownership", "telemetry_nodes")  # this node's seq range (timeline_keys)
        t_run = time.perf_counter()
        task.stage.run(con, task.screen)
        t_write = time.perf_counter()
        for table in task.stage.tables:
            target = out / f"{table}.parquet"
            con.execute(f"COPY (SELECT * FROM {table}) TO {sql_literal(target)} (FORMAT parquet)")
        events = scalar(con, "SELECT count(*) FROM page_events")
        threads = thread_count(con)
    finally:
        con.close()
    shutil.rmtree(out / "spill", ignore_errors=True)
    t_end = time.perf_counter()
    return {
        "node": task.node,
        "events": events,
        "threads": threads,  # what this task's DuckDB (and so its walks' side_by_side) had
        "seconds": round(t_end - t0, 3),
        "steps": {
            "start": round(t_load - t0, 3),
            "load": round(t_run - t_load, 3),
            "analyze": round(t_write - t_run, 3),
            "write": round(t_end - t_write, 3),
        },
    }


def code_digest() -> str:
    """Changes whenever the analysis code does: every query file and every module of the package."""
    h = hashlib.sha256(forensics.__version__.encode())
    pkg = Path(forensics.__file__).parent
    for path in sorted([*query_files(), *pkg.rglob("*.py")]):
        h.update(str(path.relative_to(pkg)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def export_inputs(con: duckdb.DuckDBPyConnection, node: str, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"""COPY (SELECT * FROM page_events WHERE node = $node AND op <> 'transfer' ORDER BY seq)
            TO {sql_literal(folder / "events.parquet")} (FORMAT parquet)""",
        {"node": node},
    )
    con.execute(
        f"""COPY (SELECT * FROM transfer_landing WHERE receiver = $node ORDER BY sender, xseq)
            TO {sql_literal(folder / "landing.parquet")} (FORMAT parquet)""",
        {"node": node},
    )


def run_node_on_ray(task: NodeTask, code: str, events: bytes, landing: bytes) -> dict[str, Any]:
    """One node's task on a Ray worker, which shares no storage with the main process: its inputs come
    as bytes, it runs run_node in a local scratch folder and returns its tables as Parquet bytes
    (`tables`), with the Ray node and host it ran on. A worker whose code digest is not `code` (another
    kv-forensics version) runs nothing and returns its own digest for the main process to refuse."""
    import ray

    where = {"node": task.node, "ray_node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}
    own = code_digest()
    if own != code:
        return {**where, "code": own}
    with tempfile.TemporaryDirectory(prefix="kvf-task-") as tmp:
        inputs, output = Path(tmp) / "in", Path(tmp) / "out"
        inputs.mkdir()
        (inputs / "events.parquet").write_bytes(events)
        (inputs / "landing.parquet").write_bytes(landing)
        account = run_node(replace(task, inputs=str(inputs), output=str(output)))
        tables = {table: (output / f"{table}.parquet").read_bytes() for table in task.stage.tables}
    return {**account, **where, "code": own, "tables": tables}


def load_outputs(con: duckdb.DuckDBPyConnection, stage: NodeStage, outputs: list[tuple[str, Path]]) -> None:
    """Every node's tables into the main database, node-local ranks and item ids offset by node base."""
    con.execute("CREATE OR REPLACE TEMP TABLE task_dirs (dir VARCHAR, node VARCHAR)")
    con.executemany("INSERT INTO task_dirs VALUES (?, ?)", [[str(d), n] for n, d in outputs])
    rows = load_query("ownership", "node_outputs")
    for table, local_cols in stage.tables.items():
        files = [str(d / f"{table}.parquet") for _, d in outputs]
        shifted = ", ".join(f"{ident(c)} + node_base AS {ident(c)}" for c in local_cols)
        replace = f" REPLACE ({shifted})" if shifted else ""
        made = f"CREATE OR REPLACE {'TEMP ' if table in stage.scratch else ''}TABLE {ident(table)}"
        con.execute(f"{made} AS SELECT * EXCLUDE (dir, node_base){replace} FROM ({rows})", {"files": files})
    con.execute("DROP TABLE task_dirs")
    # the transfers that landed (odd positions), under the name the in-process run gives them
    con.execute(
        """CREATE OR REPLACE VIEW timeline_xfer AS SELECT node, pos, sub, op, room, start, "end", ts, ts_hi, src,
           sender, xseq, ambiguous FROM timeline WHERE is_landed_pos(pos)"""
    )

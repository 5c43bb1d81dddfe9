"""DuckDB connection with the project's settings, and the helper that runs the .sql files."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from forensics.paths import load_query, sql_literal


def physical_memory() -> int:
    """The machine's memory in bytes (0 if unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def default_memory_limit() -> str:
    """Half the machine's memory: DuckDB spills the rest to the temp directory."""
    total = physical_memory()
    return f"{max(1, total // 2 // (1 << 30))}GB" if total else "4GB"


def connect(path: Path | str, memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{memory_limit or default_memory_limit()}'")
    # DuckDB keeps up to a quarter of the limit (of the machine, if that is less) as block memory for
    # reuse instead of handing it back to the OS. On VMs whose host reclaims freed guest memory, fresh
    # memory costs about 3.5 s per GB to touch: at 100M events the run took 8% less time with it
    # (115.6 s against 125.9, mean of 3; system time 27 s against 35 s).
    keep = min(memory_limit_bytes(con), physical_memory() or 1 << 62) // 4
    with contextlib.suppress(duckdb.Error):  # a speed setting only: without it the run is the same
        con.execute(f"SET block_allocator_memory = '{keep}B'")
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 2)}")
    tmp = Path(str(path) + ".tmp") if str(path) != ":memory:" else Path(os.environ.get("TMPDIR", "/tmp"))
    con.execute(f"SET temp_directory = {sql_literal(tmp)}")
    return con


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory limit in bytes (current_setting shows it as e.g. '7.4 GiB'); 0 if unreadable."""
    text = str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]).strip()
    number, _, unit = text.partition(" ")
    scale = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}
    try:
        return int(float(number) * scale[unit or "B"])
    except (ValueError, KeyError):
        return 0


def run_query(con: duckdb.DuckDBPyConnection, stage: str, name: str, **params: Any) -> None:
    """Run queries/<stage>/<name>.sql. Values reach SQL only through `SET VARIABLE` + getvariable()."""
    for key, value in params.items():
        con.execute(f"SET VARIABLE {key} = ?", [value])
    with timed(f"{stage}/{name}"):
        con.execute(load_query(stage, name))


def run_steps(con: duckdb.DuckDBPyConnection, stage: str, steps: Sequence[str | Callable[[Any], None]]) -> None:
    """Run a stage's steps in order: a name runs queries/<stage>/<name>.sql, a function gets `con`
    (each timed under KVF_PROFILE)."""
    for step in steps:
        if isinstance(step, str):
            run_query(con, stage, step)
        else:
            with timed(f"{stage}/{step.__name__}"):
                step(con)


# KVF_PROFILE=1 prints the wall time of every query file to stderr (for benchmarks, not for users).
PROFILE = bool(os.environ.get("KVF_PROFILE"))


@contextmanager
def timed(label: str) -> Iterator[None]:
    """Under KVF_PROFILE: the wall time of the block, and the page faults, system and user time of the
    whole process meanwhile (fresh memory is costly on some VMs: a fault there can cost microseconds;
    (user + sys) / wall shows how many cores the step kept busy)."""
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF) if PROFILE else None
    try:
        yield
    finally:
        if r0 is not None:
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            print(
                f"[profile] {label} {time.perf_counter() - t0:.3f}s "
                f"faults {r1.ru_minflt - r0.ru_minflt} sys {r1.ru_stime - r0.ru_stime:.2f}s "
                f"user {r1.ru_utime - r0.ru_utime:.2f}s",
                file=sys.stderr,
            )


def one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
    """The single row a query returns (an aggregate); a missing row is a bug, not an input problem."""
    row = con.execute(sql, params or []).fetchone()
    if row is None:
        raise RuntimeError(f"query returned no row: {sql[:80]}")
    return row


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    return one(con, sql, params)[0]


def telemetry_node_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The nodes that logged page events (telemetry_nodes), by name: the order per-node steps run in."""
    return [r[0] for r in con.execute("SELECT node FROM telemetry_nodes ORDER BY node").fetchall()]

"""DuckDB connection with the project's settings, and the helper that runs the .sql files."""

from __future__ import annotations

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


def default_memory_limit() -> str:
    """Half the machine's memory: DuckDB spills the rest to the temp directory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return f"{max(1, total // 2 // (1 << 30))}GB"
    except (ValueError, OSError, AttributeError):
        return "4GB"


def connect(path: Path | str, memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{memory_limit or default_memory_limit()}'")
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 2)}")
    tmp = Path(str(path) + ".tmp") if str(path) != ":memory:" else Path(os.environ.get("TMPDIR", "/tmp"))
    con.execute(f"SET temp_directory = {sql_literal(tmp)}")
    return con


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
    """Under KVF_PROFILE: the wall time of the block, and the page faults and system time of the whole
    process meanwhile (fresh memory is costly on some VMs: a fault there can cost microseconds)."""
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF) if PROFILE else None
    try:
        yield
    finally:
        if r0 is not None:
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            print(
                f"[profile] {label} {time.perf_counter() - t0:.3f}s "
                f"faults {r1.ru_minflt - r0.ru_minflt} sys {r1.ru_stime - r0.ru_stime:.2f}s",
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

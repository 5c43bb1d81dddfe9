"""The one seam between Python and DuckDB: the connection with the project's settings, quoting,
the Arrow hand-over, the runner of the stages' query files, row fetching, and the SQL macros
(define_macros, the one way a macro is made; MACRO_HOMES lists where each is defined)."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from forensics import keys, progress
from forensics.engines import sglang
from forensics.errors import InputError, check_interrupted
from forensics.paths import step_files


def sql_literal(value: str | Path) -> str:
    """Quote a string (a file path) as a SQL literal; for places DuckDB does not take parameters."""
    return "'" + str(value).replace("'", "''") + "'"


def ident(name: str) -> str:
    """Quote a name (a column from an input file) as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def arrow_view(con: duckdb.DuckDBPyConnection, name: str, table: Any) -> Iterator[str]:
    """Hand an Arrow table (or anything DuckDB can scan) to SQL as `name` for the block's duration."""
    con.register(name, table)
    try:
        yield name
    finally:
        con.unregister(name)


_SIZE_UNITS = {
    "B": 1, "BYTES": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50,
    "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "PIB": 1 << 50,
}  # fmt: skip


def parse_size(text: str) -> int | None:
    """A memory size as DuckDB writes or takes it ('7.4 GiB', '4GB', '512MB') in bytes; None if not one.
    DuckDB reads KB, MB and GB as powers of 1024, as here."""
    t = text.strip().upper().replace(" ", "")
    for unit in sorted(_SIZE_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            try:
                return int(float(t[: -len(unit)] or "x") * _SIZE_UNITS[unit])
            except ValueError:
                return None
    try:
        return int(float(t))
    except ValueError:
        return None


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


def check_memory_limit(value: str, where: str = "--memory-limit") -> str:
    """A memory limit DuckDB accepts (8GB, 500MB, 8GiB, 50%), checked before any work starts; anything
    else is an InputError naming the option."""
    try:
        if value.strip().startswith("-"):
            raise duckdb.ParserException("a memory limit cannot be negative")
        duckdb.connect(":memory:").execute("SET memory_limit = ?", [value])
    except duckdb.Error as err:
        raise InputError(f"{where}: {value!r} is not a memory size (e.g. 8GB, 500MB, 50%): {err}") from None
    return value


def session(con: duckdb.DuckDBPyConnection) -> None:
    """The settings of one DuckDB session (a connection or a cursor: a cursor inherits none of them).
    Every table, view and macro the analysis makes goes to the schema `internal`; the investigator's
    surface is schema `main`, documented views over them (forensics.catalog.publish, at the end)."""
    con.execute(f"SET schema = '{INTERNAL}'")
    con.execute(f"SET search_path = '{INTERNAL},main'")
    con.execute("SET TimeZone = 'UTC'")


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor on `con` (its own session, for reading while `con` stores) with `con`'s schema, search
    path and time zone: a DuckDB cursor inherits none of them."""
    cur = con.cursor()
    for name in ("schema", "search_path", "TimeZone"):
        value = con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0]
        cur.execute(f"SET {name} = ?", [value])
    return cur


def connect(path: Path | str, memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {INTERNAL}")
    session(con)
    con.execute("SET enable_progress_bar = false")
    con.execute("SET memory_limit = ?", [check_memory_limit(memory_limit) if memory_limit else default_memory_limit()])
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
    define_macros(con, CONNECTION_MACROS)
    return con


# Every SQL macro is an entry (head -> body) of a MACROS dict beside the fact it mirrors, made by define_macros
# in the database itself (incident.duckdb's views use them from any client). Who makes each: connect, on every
# connection, those any query may read; a stage's step, its own (a macro over a table waits for the table).
MACRO_HOMES = {
    "forensics.keys.MACROS": "connect: the event-key layout and the op codes",
    "forensics.engines.sglang.MACROS": "connect: SGLang's input limit, leak window, pool rule (sglang_rank_pool), "
    "clock bounds (landing_offset_lo, landing_offset_hi, alloc_rounding), canary reads (canary_read_violation), "
    "vLLM request ids (vllm_request_keys, engines.integrity)",
    "forensics.findings.rules.MACROS": "the findings' first step: cross_account, possible_pair, source_key",
    "forensics.findings.likelihood.MACROS": "its step, once the run has measured source_tier: is_likely, likely_tier",
}
CONNECTION_MACROS = {**keys.MACROS, **sglang.MACROS}


def define_macros(con: duckdb.DuckDBPyConnection, macros: dict[str, str]) -> None:
    """Create (or replace) each macro of `macros` (head -> body) on `con`."""
    for head, body in macros.items():
        con.execute(f"CREATE OR REPLACE MACRO {head} AS {body}")


def thread_count(con: duckdb.DuckDBPyConnection) -> int:
    """The threads `con` was given (connect's `threads`: investigate --threads, or a task's share of
    it): also how many threads the steps on `con` run their compiled walks in."""
    return int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory limit in bytes (current_setting shows it as e.g. '7.4 GiB'); 0 if unreadable."""
    return parse_size(str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])) or 0


_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)\b")


def param_names(sql: str) -> set[str]:
    """The named parameters ($name) a query file reads, outside its comments."""
    return set(_PARAM.findall("\n".join(line.split("--")[0] for line in sql.splitlines())))


def bound(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """Of `params`, those `sql` reads: DuckDB refuses a value for a parameter the statement lacks."""
    names = param_names(sql)
    return {k: v for k, v in params.items() if k in names}


_SCRATCH = re.compile(r"^--\s*scratch:\s*(.*)$")


def scratch_tables(sql: str) -> list[str]:
    """The tables a query file's `-- scratch: a, b` header lines declare: temp tables its step is the
    last to read, which the runner drops when the step ends (no file of a step is a lone DROP)."""
    names: list[str] = []
    for line in itertools.takewhile(lambda line: line.startswith("--"), sql.splitlines()):
        if m := _SCRATCH.match(line):
            text = re.sub(r"\([^)]*\)", "", m.group(1))  # "(made by ...)": a note, not a name
            names += [n.strip() for n in text.split(",") if n.strip()]
    return names


def _statements(stage: str, name: str, params: dict[str, Any]) -> list[str]:
    """The statements of a step (one per file), after checking that each parameter given is read."""
    texts = [path.read_text(encoding="utf-8") for path in step_files(stage, name)]
    unread = set(params) - set().union(*(param_names(t) for t in texts))
    if unread:
        raise TypeError(f"{stage}/queries/{name} reads no parameter {', '.join(sorted(unread))}")
    return texts


def run_query(con: duckdb.DuckDBPyConnection, stage: str, name: str, **params: Any) -> None:
    """Run forensics/<stage>/queries/<name>.sql, or each file of the folder <name>/ in order, then drop
    the tables its files declare scratch (scratch_tables). Values reach the query files only as named
    parameters ($name), bound by DuckDB."""
    texts = _statements(stage, name, params)
    with timed(f"{stage}/{name}"):
        for sql in texts:
            con.execute(sql, bound(sql, params))
        for table in (t for sql in texts for t in scratch_tables(sql)):
            con.execute(f"DROP TABLE {ident(table)}")


def query_rows(con: duckdb.DuckDBPyConnection, stage: str, name: str, **params: Any) -> list[dict[str, Any]]:
    """Run forensics/<stage>/queries/<name>.sql (a SELECT) and return its rows as dicts."""
    (sql,) = _statements(stage, name, params)
    with timed(f"{stage}/{name}"):
        return rows_of(con, sql, params)


def rows_of(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows of one SELECT as dicts."""
    cur = con.execute(sql, params or {})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def iter_rows(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None, chunk: int = 10_000
) -> Iterator[dict[str, Any]]:
    """Rows of one SELECT as dicts, fetched `chunk` at a time: memory holds a chunk, not the result. Any
    other query on `con` before the last row closes the stream."""
    cur = con.execute(sql, params or {})
    cols = [d[0] for d in cur.description]
    while batch := cur.fetchmany(chunk):
        for r in batch:
            yield dict(zip(cols, r, strict=True))


Step = str | tuple[str, dict[str, Any]] | Callable[[Any], None]


def run_steps(con: duckdb.DuckDBPyConnection, stage: str, steps: Sequence[Step]) -> None:
    """Run a stage's steps in order: a name runs forensics/<stage>/queries/<name>.sql, a pair (name,
    params) runs it with those parameters, a function gets `con` (each timed under KVF_PROFILE)."""
    for step in steps:
        if isinstance(step, str):
            run_query(con, stage, step)
        elif isinstance(step, tuple):
            run_query(con, stage, step[0], **step[1])
        else:
            with timed(f"{stage}/{step.__name__}"):
                step(con)


INTERNAL = "internal"  # the schema of the analysis' own tables (see connect)

# KVF_PROFILE=1 prints the wall time of every query file to stderr (for benchmarks, not for users).
PROFILE = bool(os.environ.get("KVF_PROFILE"))


@contextmanager
def timed(label: str) -> Iterator[None]:
    """Reports the block to forensics.progress (shown on a terminal). Under KVF_PROFILE: the wall time
    of the block, and the page faults, system and user time of the whole process meanwhile (fresh
    memory is costly on some VMs: a fault there can cost microseconds; (user + sys) / wall shows how
    many cores the step kept busy)."""
    check_interrupted()  # a signal a query turned into another error stops the run at the next step
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF) if PROFILE else None
    progress.started(label)
    try:
        yield
    finally:
        progress.ended(label, time.perf_counter() - t0)
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

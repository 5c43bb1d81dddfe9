"""Writing findings files: CSV cells neutralized against formula injection, stable formatting, private modes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.db import ident, scalar, sql_literal

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralize(value: str) -> str:
    """A text cell a spreadsheet would run as a formula gets a leading apostrophe."""
    return "'" + value if value.startswith(FORMULA_START) else value


def fmt_ts(value: datetime) -> str:
    """UTC, millisecond precision (floored), Z suffix: 2026-08-29T10:40:10.012Z. Naive values are UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    elif value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return fmt_ts(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return neutralize(value)
    return value


def private_open(path: Path, mode: str = "w"):
    """Outputs hold customer identifiers: created readable by the owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.chmod(path, 0o600)
    return os.fdopen(fd, mode, encoding="utf-8", newline="")


@contextmanager
def private_files() -> Iterator[None]:
    """Files created meanwhile (the DuckDB database, its WAL and spill files) are private to the owner."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: Path) -> None:
    """An output that may pre-date this run (or was made by a library) is made owner-only."""
    if path.exists():
        os.chmod(path, 0o700 if path.is_dir() else 0o600)


def _formatted(name: str, dtype: str) -> str:
    """SQL that renders one result column as its CSV cell (the rules of `cell`, applied inside DuckDB)."""
    col = ident(name)
    if dtype.startswith("TIMESTAMP"):  # UTC (the session time zone), milliseconds floored, Z
        return f"strftime({col}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z'"
    if dtype == "BOOLEAN":
        return f"CASE WHEN {col} THEN 'yes' WHEN NOT {col} THEN 'no' END"
    if dtype == "VARCHAR":
        starts = ", ".join(sql_literal(c) for c in FORMULA_START)
        return f"CASE WHEN left({col}, 1) IN ({starts}) THEN chr(39) || {col} ELSE nullif({col}, '') END"
    return col


def write_csv(
    con: duckdb.DuckDBPyConnection, query: str, path: Path, params: dict[str, Any] | list[Any] | None = None
) -> int:
    """Run `query` and write its rows as CSV; text, time and yes/no cells are formatted inside DuckDB."""
    # materialized first: DuckDB may drop an ORDER BY inside a subquery, a table's rowid keeps it
    con.execute(f"CREATE OR REPLACE TEMP TABLE csv_out AS {query}", params or [])
    described = con.execute("DESCRIBE csv_out").fetchall()
    n = int(scalar(con, "SELECT count(*) FROM csv_out"))
    header = ", ".join(f"{_formatted(c, str(t))} AS {ident(c)}" for c, t, *_ in described)
    with private_files():  # DuckDB creates the file: owner-only from the start
        con.execute(
            f"COPY (SELECT {header} FROM csv_out ORDER BY rowid) TO {sql_literal(path)} (FORMAT csv, HEADER true)"
        )
    make_private(path)
    con.execute("DROP TABLE csv_out")
    return n


def write_parquet(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> int:
    """A findings table as Parquet, typed (timestamps stay timestamps, counts stay integers): for the
    analyst who loads the large tables into another tool. Owner-only, like every output."""
    n = int(scalar(con, f"SELECT count(*) FROM {ident(table)}"))
    with private_files():
        con.execute(f"COPY {ident(table)} TO {sql_literal(path)} (FORMAT parquet, COMPRESSION zstd)")
    make_private(path)
    return n


def write_json(obj: Any, path: Path) -> None:
    with private_open(path) as fh:
        fh.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

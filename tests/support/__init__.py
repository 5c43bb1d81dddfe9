"""Helpers the tests share: the analysis on a connection (analysis), bundles built from rows
(bundlekit), broken and hostile inputs (broken), comparison with the simulator's truth (truthcheck)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
TESTS = ROOT / "tests"
DATA = TESTS / "data"
EXAMPLE = DATA / "example"  # the worked example of docs/evidence-bundle.md
GOLDEN = TESTS / "golden"
REFERENCE = TESTS / "reference"  # SQL definitions the fast paths are checked against
SAMPLE = ROOT / "sample_data" / "bundle"
BENCH = ROOT / "benchmarks"


def open_db(path: Path | str, read_only: bool = True):  # noqa: ANN201 (a DuckDB connection)
    """A run's incident.duckdb as a test reads it: the public views of main first, then the analysis'
    own tables (schema internal) by their bare names."""
    import duckdb

    con = duckdb.connect(str(path), read_only=read_only)
    con.execute("SET search_path = 'main,internal'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def bench_module(name: str):  # noqa: ANN201 (a module)
    """A benchmarks/<name>.py script, imported as a module (the benchmarks are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def insert_rows(con, table: str, rows: list[tuple], select: str = "*") -> None:  # noqa: ANN001 (a DuckDB connection)
    """`rows` (tuples of Python values, in the table's column order) into `table` in one statement, as
    Arrow columns c0, c1, ...: `select` makes them the table's values (e.g. "c0, make_timestamp(c1::BIGINT)"),
    INSERT casts the rest. executemany inserts a row at a time (5.9 s of CPU for 4,000 rows), this the
    same rows in the same order in milliseconds."""
    import pyarrow as pa

    if not rows:
        return
    columns = {f"c{i}": pa.array(list(values)) for i, values in enumerate(zip(*rows, strict=True))}
    con.register("kvf_test_rows", pa.table(columns))
    try:
        con.execute(f"INSERT INTO {table} SELECT {select} FROM kvf_test_rows")
    finally:
        con.unregister("kvf_test_rows")

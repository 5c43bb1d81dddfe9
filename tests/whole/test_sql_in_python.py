"""Query-sized SQL leaves Python (#49): scripts/sql_in_python.py counts the SQL strings left in the
package's modules, and the packages that hold none keep holding none (their SQL, if they ever need any,
goes to a query file with its header)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from forensics.paths import PACKAGE
from tests.support import ROOT

# packages with no query-sized SQL string in Python: the plugin and the kernels never touch DuckDB, the
# others hand their SQL to query files
FREE = (
    "intake", "sglang", "engines", "gateway_formats", "ownership", "cohorts", "report", "catalog", "custody",
    "pipeline", "siem", "simulate", "watch", "cli",
)  # fmt: skip


def _counter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sql_in_python", ROOT / "scripts" / "sql_in_python.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_counter_finds_a_query_and_leaves_docstrings_and_short_probes(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        '"""A docstring that says\nSELECT\nthree\nlines\n"""\n'
        'PROBE = "SELECT 1"\n'
        'Q = f"""CREATE TABLE t AS\n    SELECT a\n    FROM {PROBE}\n    WHERE a > 0"""\n'
        "def f() -> str:\n"
        '    """Docstring:\n    WITH\n    a\n    b\n    """\n'
        '    return """\n    WITH x AS (SELECT 1)\n    SELECT *\n    FROM x\n    """\n'
    )
    assert _counter().query_strings(src) == [
        (7, 4),
        (17, 5),
    ]  # the f-string query (lines 7-10), the returned one (17-21)


def test_the_packages_without_sql_strings_stay_without() -> None:
    counter = _counter()
    found = {
        p.relative_to(PACKAGE).as_posix(): counter.query_strings(p)
        for package in FREE
        for p in sorted((PACKAGE / package).rglob("*.py"))
    }
    assert not {m: q for m, q in found.items() if q}, "query-sized SQL in Python: move it to a query file"

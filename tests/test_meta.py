"""Meta-tests: every SQL file is used by the code, every command has help, every query has a header."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from forensics.cli import app
from forensics.paths import query_files

ROOT = Path(__file__).resolve().parents[1]


def _python_sources() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "forensics").rglob("*.py"))


def test_every_sql_file_is_used() -> None:
    code = _python_sources()
    unused = []
    for sql in query_files():
        name = sql.stem
        if not re.search(rf"['\"]{re.escape(name)}['\"]", code):
            unused.append(str(sql.relative_to(ROOT)))
    assert unused == [], f"SQL files no code runs: {unused}"


def test_every_sql_file_has_a_header() -> None:
    for sql in query_files():
        head = sql.read_text().splitlines()[:6]
        assert head and head[0].startswith("-- "), f"{sql.name}: first line should say what it builds"
        assert any(line.startswith("-- grain:") for line in head), f"{sql.name}: header lacks '-- grain:'"


def test_every_command_has_help() -> None:
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert {"ingest", "investigate", "simulate", "audit-config", "cohorts"} <= set(names)
    for c in app.registered_commands:
        assert (c.callback.__doc__ or "").strip(), f"{c.name}: no help text"
    for name in names:
        out = subprocess.run([sys.executable, "-m", "forensics", name, "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "Usage" in out.stdout, name

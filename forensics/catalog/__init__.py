"""The investigator's surface of incident.duckdb, and its documentation.

The analysis writes every table, view and macro to the schema `internal` (forensics.db.connect).
`publish` then makes schema `main` what an investigator opening the file meets: a documented view
over each public table (catalog.toml names them) and the entry views for the usual questions
(queries/<name>.sql), every view and column with a COMMENT; it comments every internal table too
(from the header of the query file that makes it, else catalog.toml [internal]) and its columns.
`schema_markdown` renders those comments as docs/schema.md.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from forensics.db import INTERNAL, sql_literal
from forensics.paths import PACKAGE, load_query, query_files

# the entry views, each queries/<name>.sql: whose data reached an account, every exposure on a node
# in a time range, the provenance of one response
ENTRY_VIEWS = ("exposure_by_account", "exposures_on_node", "response_provenance")
MADE_BY = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)


@cache
def catalog() -> dict[str, Any]:
    return tomllib.loads((Path(__file__).parent / "catalog.toml").read_text(encoding="utf-8"))


def header(sql: str) -> str:
    """What a query file says it builds: its leading comment lines up to `grain:` (without it)."""
    about = []
    for line in sql.splitlines():
        if not line.startswith("--") or line.startswith("-- grain:"):
            break
        about.append(line.removeprefix("--").strip())
    return " ".join(a for a in about if a)


def _reads(sql: str) -> list[str]:
    m = re.search(r"reads:\s*([^;]*)", sql)
    return [r.strip() for r in m.group(1).split(",")] if m else []


@cache
def _makers() -> dict[str, tuple[str, str]]:
    """table -> (the query file that makes it, its header), for the internal tables' comments. The first
    file in path order wins: a table two folders make (gateway_join_end/ and gateway_join_none/, its empty
    form) is described by the one that sorts first, the folder that fills it."""
    made: dict[str, tuple[str, str]] = {}
    for path in query_files():
        sql = path.read_text(encoding="utf-8")
        for m in MADE_BY.finditer(sql):
            made.setdefault(m.group(1).lower(), (path.relative_to(PACKAGE.parent).as_posix(), header(sql)))
    return made


def _objects(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, str]:
    """name -> TABLE or VIEW, of one schema of the database."""
    rows = con.execute(
        "SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE schema_name = ? AND NOT temporary "
        "UNION ALL SELECT view_name, 'VIEW' FROM duckdb_views() WHERE schema_name = ? AND NOT internal "
        "AND NOT temporary",
        [schema, schema],
    ).fetchall()
    return dict(rows)


def _columns(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, list[str]]:
    """table or view -> its columns in order, of one schema: one read of the catalog for all of them
    (duckdb_columns() lists every column of the database however narrow the filter, so a read per
    table cost a tenth of a small run's publish)."""
    out: dict[str, list[str]] = {}
    for name, col in con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = ? ORDER BY table_name, column_index",
        [schema],
    ).fetchall():
        out.setdefault(name, []).append(col)
    return out


def _comment(con: duckdb.DuckDBPyConnection, what: str, target: str, text: str) -> None:
    # COMMENT takes no parameters; the text is ours (catalog.toml, query headers), quoted all the same
    con.execute(f"COMMENT ON {what} {target} IS {sql_literal(text)}")


def column_doc(view: str, column: str) -> str | None:
    spec = catalog()["views"].get(view, {})
    return spec.get("columns", {}).get(column) or catalog()["columns"].get(column)


def publish(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Schema main: the public views that the analysis' tables allow, commented; the internal tables
    commented. Returns the public views made. A public column without a meaning is a bug (the test
    of this package keeps catalog.toml complete), so it raises."""
    # one transaction: a thousand comments committed each on its own cost a commit apiece
    con.execute("BEGIN TRANSACTION")
    try:
        made = _publish(con)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return made


def _publish(con: duckdb.DuckDBPyConnection) -> list[str]:
    internal = _objects(con, INTERNAL)
    views = catalog()["views"]
    made, bodies = [], {}
    for name, spec in views.items():
        if name in ENTRY_VIEWS:
            sql = load_query("catalog", name)
            if not all(r in internal for r in _reads(sql)):
                continue
            about, body = header(sql), sql.strip().rstrip(";")
        elif name in internal:
            about, body = spec["about"], f"SELECT * FROM {INTERNAL}.{name}"
        else:
            continue  # an ingest-only database has no findings
        con.execute(f"CREATE OR REPLACE VIEW main.{name} AS {body}")
        bodies[name] = about
        made.append(name)
    public = _columns(con, "main")
    for name in made:
        _comment(con, "VIEW", f"main.{name}", bodies[name])
        for col in public[name]:
            doc = column_doc(name, col)
            if not doc:
                raise RuntimeError(f"catalog.toml: no meaning for column {col!r} of the view {name}")
            _comment(con, "COLUMN", f"main.{name}.{col}", doc)
    notes = catalog().get("internal", {})
    columns = _columns(con, INTERNAL)
    for name, kind in sorted(internal.items()):
        maker = _makers().get(name.lower())
        note: str | None = notes.get(name) or (f"{maker[1]} ({maker[0]})" if maker else None)
        if not note:
            raise RuntimeError(f"catalog.toml: internal table {name} has no query header and no [internal] note")
        _comment(con, kind, f"{INTERNAL}.{name}", f"Internal: {note}")
        where = maker[0] if maker else "forensics (see catalog.toml [internal])"
        for col in columns.get(name, []):
            doc = catalog()["columns"].get(col) or f"A working column of {name}: see {where}."
            _comment(con, "COLUMN", f"{INTERNAL}.{name}.{col}", doc)
    return made


def schema_markdown(con: duckdb.DuckDBPyConnection) -> str:
    """docs/schema.md: every public view with its columns, then every internal table, from the
    database's own comments."""
    out = [
        "# incident.duckdb",
        "",
        "Generated from the comments of a run's database (`make schema-doc`); tests/whole/test_catalog.py",
        "keeps it current. Open the file with `duckdb out/sample/incident.duckdb` (or Python) from any",
        "folder: schema `main` holds the views below; the analysis' own tables are in schema `internal`.",
        "",
        "Entry views for the usual questions:",
        "",
        "```sql",
        "SELECT * FROM exposure_by_account WHERE recipient_account_id = 'acct-0becd7';  -- whose data reached it",
        "SELECT * FROM exposures_on_node WHERE node = 'decode-1'",
        "  AND first_exposed_at >= '2026-09-01T00:00:00Z' AND first_exposed_at < '2026-09-02T00:00:00Z';",
        "SELECT * FROM response_provenance WHERE request_id = 'req-22f340ee9409' ORDER BY read_at, seg_start;",
        "```",
        "",
        "## Views (schema main)",
        "",
    ]
    for name, about in con.execute(
        "SELECT view_name, comment FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal ORDER BY view_name"
    ).fetchall():
        out += [f"### {name}", "", about or "", "", "| column | type | meaning |", "|---|---|---|"]
        for col, typ, doc in con.execute(
            "SELECT column_name, data_type, comment FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND table_name = ? ORDER BY column_index",
            [name],
        ).fetchall():
            out.append(f"| `{col}` | {typ} | {_cell(doc)} |")
        out.append("")
    out += ["## Internal tables and views (schema internal)", "", "| name | what it holds |", "|---|---|"]
    for name, about in con.execute(
        "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = ? AND NOT temporary "
        "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE schema_name = ? AND NOT internal "
        "AND NOT temporary ORDER BY 1",
        [INTERNAL, INTERNAL],
    ).fetchall():
        out.append(f"| `{name}` | {_cell((about or '').removeprefix('Internal: '))} |")
    return "\n".join(out) + "\n"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")

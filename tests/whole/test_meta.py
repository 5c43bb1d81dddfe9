"""Meta-tests: every SQL file is used by the code, every command has help, every query has a header."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb

from forensics.cli import app
from forensics.db import scratch_tables
from forensics.paths import PACKAGE, query_dir, query_files, step_files


def _stage_sources(stage: str) -> str:
    """The Python of one stage package: where its query files must be named."""
    return "\n".join(p.read_text() for p in sorted((PACKAGE / stage).rglob("*.py")))


def test_every_sql_file_is_used_by_its_own_stage() -> None:
    unused = []
    for sql in query_files():
        # a step of several statements is a folder (queries/<step>/NN_<table>.sql): the step is named
        stage, step = sql.relative_to(PACKAGE).parts[0], sql.relative_to(PACKAGE).parts[2].removesuffix(".sql")
        if not re.search(rf"['\"]{re.escape(step)}['\"]", _stage_sources(stage)):
            unused.append(str(sql.relative_to(PACKAGE)))
    assert unused == [], f"query files their stage never runs: {unused}"


def _header(sql: Path) -> list[str]:
    lines = sql.read_text().splitlines()
    return lines[: next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))]


def _grain(sql: Path) -> str | None:
    """The header's grain (what one row is): from `-- grain:` up to `; reads:`, continuation lines joined."""
    head = " ".join(line.removeprefix("--").strip() for line in _header(sql))
    m = re.search(r"grain:\s*(.*?);\s*reads:", head)
    return m.group(1).strip() if m else None


MADE = re.compile(r"(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?)(\w+)", re.I)


def test_every_sql_file_has_a_header() -> None:
    for sql in query_files():
        head = _header(sql)
        assert head and head[0].startswith("-- "), f"{sql.name}: first line should say what it builds"
        assert any(line.startswith("-- grain:") for line in head), f"{sql.name}: header lacks '-- grain:'"


def test_every_grain_says_what_one_row_is() -> None:
    """Not empty, not n/a, not the name of the table the file makes (that says which table, not what one
    of its rows is)."""
    for sql in query_files():
        grain = _grain(sql)
        assert grain, f"{sql.name}: no grain before '; reads:'"
        assert not re.match(r"(n/?a|none|see\b|-)", grain, re.I), f"{sql.name}: grain {grain!r} says nothing"
        made = {m.lower() for m in MADE.findall(sql.read_text())}
        assert grain.lower() not in made, f"{sql.name}: grain {grain!r} names the table, not its row"


TEMP_MADE = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?TEMP\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)


def _body(sql: Path) -> str:
    return "\n".join(line for line in sql.read_text().splitlines() if not line.startswith("--"))


def _steps() -> dict[tuple[str, str], list[Path]]:
    """Each step (stage, name) and its files: <name>.sql, or the files of the folder <name>/."""
    steps: dict[tuple[str, str], list[Path]] = {}
    for sql in query_files():
        stage, step = sql.relative_to(PACKAGE).parts[0], sql.relative_to(PACKAGE).parts[2].removesuffix(".sql")
        steps.setdefault((stage, step), []).append(sql)
    return steps


def test_no_query_file_is_a_lone_drop() -> None:
    """A step's scratch is declared in its header (`-- scratch:`) and dropped by the runner."""
    drops = [str(sql.relative_to(PACKAGE)) for sql in query_files() if _body(sql).strip().upper().startswith("DROP ")]
    assert drops == []


def test_declared_scratch_is_made_as_a_temp_table_and_ended_once() -> None:
    """Each table a `-- scratch:` header names is a temp table its stage makes: by the step that declares
    it (its files make it or read it), else, for one an earlier step hands on, by the stage's query files
    or Python; and no two steps end the same table."""
    ender: dict[str, tuple[str, str]] = {}
    for (stage, step), files in _steps().items():
        made_here = {t.lower() for f in files for t in TEMP_MADE.findall(_body(f))}
        text_here = "\n".join(_body(f) for f in files)
        stage_text = "\n".join(_body(f) for f in query_files() if f.relative_to(PACKAGE).parts[0] == stage)
        made_in_stage = {t.lower() for t in TEMP_MADE.findall(stage_text + _stage_sources(stage))}
        for table in (t for f in files for t in scratch_tables(f.read_text())):
            assert table not in ender, f"{stage}/{step}: {table} is already scratch of {ender[table]}"
            ender[table] = (stage, step)
            assert table in made_in_stage, f"{stage}/{step}: scratch {table} is no temp table of {stage}"
            if table not in made_here:
                assert re.search(rf"\b{table}\b", text_here + _stage_sources(stage)), (stage, step, table)
    assert {"conflict_keys", "landing_seqs", "assign_open"} <= set(ender)


def test_a_step_leaves_no_undeclared_temp_table_behind() -> None:
    """A temp table a step makes that nothing outside the step reads (no other query file, no Python of
    the package) is declared scratch by the step: it would outlive its last reader otherwise."""
    everything = {
        p: _body(p) if p.suffix == ".sql" else p.read_text()
        for p in PACKAGE.rglob("*.*")
        if p.suffix in (".sql", ".py")
    }
    left = []
    for (stage, step), files in _steps().items():
        declared = {t for f in files for t in scratch_tables(f.read_text())}
        for table in {t.lower() for f in files for t in TEMP_MADE.findall(_body(f))} - declared:
            elsewhere = [p for p, text in everything.items() if p not in files and re.search(rf"\b{table}\b", text)]
            if not elsewhere:
                left.append(f"{stage}/{step}: {table}")
    assert left == []


def test_the_runner_drops_a_steps_scratch() -> None:
    from forensics.db import connect, run_query

    con = connect(":memory:")
    con.execute("CREATE TEMP TABLE landing_window_hits (sender VARCHAR, xseq BIGINT)")
    con.execute("CREATE TABLE transfer_landing (sender VARCHAR, xseq BIGINT, ambiguous BOOLEAN)")
    con.execute("INSERT INTO transfer_landing VALUES ('p', 1, false), ('p', 2, false)")
    con.execute("INSERT INTO landing_window_hits VALUES ('p', 2)")
    run_query(con, "ownership", "landing_ambiguous")
    assert con.execute("SELECT xseq, ambiguous FROM transfer_landing ORDER BY xseq").fetchall() == [
        (1, False),
        (2, True),
    ]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'landing_window_hits'").fetchall() == [
        (0,)
    ]


def test_step_files_are_numbered_01_up() -> None:
    """A step folder's files run in name order: two-digit prefixes from 01, one per file, no gaps or
    letters (8b_ sorted by luck)."""
    folders = sorted({sql.parent for sql in query_files() if sql.parent.name != "queries"})
    assert folders
    for folder in folders:
        names = sorted(p.name for p in folder.glob("*.sql"))
        assert [n[:3] for n in names] == [f"{i:02d}_" for i in range(1, len(names) + 1)], (folder.name, names)


def test_every_sql_file_holds_one_statement() -> None:
    for sql in query_files():
        assert len(duckdb.extract_statements(sql.read_text())) == 1, (
            f"{sql.relative_to(PACKAGE)}: one statement per file"
        )


def test_a_step_folder_runs_its_files_in_order() -> None:
    files = step_files("findings", "conflict_reads")
    assert len(files) > 1 and files == sorted(files)
    assert [f.name for f in step_files("findings", "exposures")] == ["exposures.sql"]


def _declared(sql: Path) -> set[str] | None:
    lines = [line for line in sql.read_text().splitlines() if line.startswith("--") and "params:" in line]
    if not lines:
        return None
    m = re.search(r"params:\s*([^;]*)", lines[0])
    assert m is not None
    text = re.sub(r"\([^)]*\)", "", m.group(1))  # "(hour | day)": what a value may be, not a name
    return set(re.findall(r"\$?([a-z_]+)", text)) - {"none"}


def test_every_sql_file_declares_exactly_the_parameters_it_reads() -> None:
    for sql in query_files():
        body = "\n".join(line.split("--")[0] for line in sql.read_text().splitlines())
        read = set(re.findall(r"getvariable\('([a-z_]+)'\)", body)) | set(re.findall(r"\$([a-z_]+)\b", body))
        declared = _declared(sql)
        assert declared is not None, f"{sql.name}: header lacks 'params:'"
        assert declared == read, f"{sql.name}: declares {sorted(declared)}, reads {sorted(read)}"


def test_the_parameter_check_reads_a_header() -> None:
    assert _declared(query_dir("report") / "blast_hours.sql") == {"bucket"}


def test_every_command_has_help() -> None:
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert {"ingest", "investigate", "simulate", "audit-config", "cohorts"} <= set(names)
    for c in app.registered_commands:
        assert (c.callback.__doc__ or "").strip(), f"{c.name}: no help text"
    helps = {}
    for name in names:
        out = subprocess.run([sys.executable, "-m", "forensics", name, "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "Usage" in out.stdout, name
        helps[name] = " ".join(out.stdout.split())
    # bracketed words in help texts are printed, not read as markup (rich's ate them: "the options marked .")
    assert "[scale] Days of traffic" in helps["simulate"] and "bundle.toml [engine] version" in helps["simulate"]


def test_every_macro_is_made_by_define_macros_from_a_home() -> None:
    """One mechanism for SQL macros: only forensics.db.define_macros writes CREATE MACRO, and each home
    db.MACRO_HOMES names is a dict of macros (head -> body)."""
    import importlib

    from forensics.db import MACRO_HOMES

    creates = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?MACRO", re.I)
    writers = sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.suffix in (".py", ".sql") and creates.search(p.read_text())
    )
    assert writers == ["db.py"]
    for home in MACRO_HOMES:
        module, _, name = home.rpartition(".")
        macros = getattr(importlib.import_module(module), name)
        assert macros and all(re.fullmatch(r"\w+\([\w, ]*\)", head) for head in macros), home


def test_query_files_take_named_parameters_only() -> None:
    """One parameter style in query files: $name, bound by forensics.db's runner (never session
    variables, which outlive the query that needs them, nor positional $1 and ?)."""
    for sql in query_files():
        body = "\n".join(line.split("--")[0] for line in sql.read_text().splitlines())
        body = re.sub(r"'[^']*'", "''", body)  # string literals may hold '?' and '$'
        assert "getvariable(" not in body.lower(), f"{sql.name}: getvariable; take a $name parameter"
        assert not re.search(r"\$\d|\?", body), f"{sql.name}: a positional parameter; name it ($name)"


def test_the_runner_refuses_a_parameter_the_step_does_not_read() -> None:
    import pytest

    from forensics.db import connect, run_query

    with pytest.raises(TypeError, match="reads no parameter nodes"):
        run_query(connect(":memory:"), "ownership", "node_own_rooms", node="a", nodes="b")


def test_the_reports_tables_are_made_by_its_steps() -> None:
    """forensics.report.REPORT_STEPS lists every report query that makes a table, in one place (save
    notice_incident, which stores the context the report was rendered from); the other report queries
    are the templates' SELECTs."""
    from forensics.report import REPORT_STEPS

    named = {s if isinstance(s, str) else s[0] for s in REPORT_STEPS if not callable(s)}
    steps = {step: files for (stage, step), files in _steps().items() if stage == "report"}
    making = {step for step, files in steps.items() if any(MADE.search(_body(f)) for f in files)}
    assert making - named == {"notice_incident"}
    assert named <= making

"""Ingest stage, gateway request log: JSONL, JSONL.gz, CSV, CSV.gz and Parquet into `gateway`.

All formats are first staged as text columns, then typed by one query, so every format is held to
the same contract. Reads: gateway/*. Writes: gateway, rejected.
"""

from __future__ import annotations

import duckdb

from forensics.bundle import InputFile
from forensics.contract import GATEWAY_FIELDS
from forensics.ingest.rawtext import JSON_OBJECT_LINES, load_lines
from forensics.ingest.staged import validate_staged
from forensics.paths import sql_literal

FIELDS = GATEWAY_FIELDS


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _stage_jsonl(con: duckdb.DuckDBPyConnection, f: InputFile) -> bool:
    if not load_lines(con, f):
        return False
    cols = ",\n".join(
        f"CASE WHEN ok THEN json_extract_string(line, '$.{c}') END AS {c}"
        if c != "headers"
        else "CASE WHEN ok THEN CAST(json_extract(line, '$.headers') AS VARCHAR) END AS headers"
        for c in FIELDS
    )
    con.execute(f"""CREATE OR REPLACE TEMP TABLE gw_stage AS
        SELECT row, parse_error, {cols} FROM ({JSON_OBJECT_LINES})""")
    con.execute("DROP TABLE raw_lines")
    return True


def _stage_table(con: duckdb.DuckDBPyConnection, f: InputFile, reader: str, row_expr: str, view: bool = False) -> bool:
    """Stage a Parquet or CSV gateway file as text columns: a view over a Parquet file (its row numbers
    are stable, so it can be read twice: for rejected rows and for loaded ones), a table otherwise."""
    try:
        names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall() if r[0] != "file_row_number"]
    except duckdb.Error as err:  # the message names the file by its path in the bundle, not on this machine
        f.error = f"cannot read: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        return False
    missing = [c for c in ("ts", "request_id", "account_id", "status") if c not in names]
    if missing:
        f.error = f"wrong columns: missing {', '.join(missing)} (has {', '.join(names[:20])})"
        return False
    cols = ", ".join((f"CAST({_q(c)} AS VARCHAR) AS {c}" if c in names else f"NULL::VARCHAR AS {c}") for c in FIELDS)
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP {'VIEW' if view else 'TABLE'} gw_stage AS SELECT {row_expr} AS row, "
            f"NULL::VARCHAR AS parse_error, {cols} FROM {reader}"
        )
    except duckdb.Error as err:
        f.error = f"cannot read rows: {str(err).splitlines()[0][:200]}"
        return False
    return True


def load_gateway_file(con: duckdb.DuckDBPyConnection, f: InputFile) -> None:
    name = f.rel.lower()
    path = sql_literal(f.path)
    if name.endswith(".parquet"):
        ok = _stage_table(con, f, f"read_parquet({path}, file_row_number = true)", "file_row_number + 1", view=True)
    elif name.endswith((".csv", ".csv.gz")):
        # header on line 1: data row k is on line k + 1
        reader = (
            f"read_csv({path}, header = true, all_varchar = true, parallel = false, quote = '\"', escape = '\"', "
            "strict_mode = false, null_padding = true, max_line_size = 67108864)"
        )
        ok = _stage_table(con, f, reader, "(row_number() OVER ()) + 1")
    else:
        ok = _stage_jsonl(con, f)
    if not ok:
        return
    kind = "VIEW" if name.endswith(".parquet") else "TABLE"
    validate_staged(
        con,
        f,
        "gateway_validate",
        "gw_stage",
        "gateway",
        f"DROP VIEW IF EXISTS gw_typed; DROP {kind} IF EXISTS gw_stage",
        "cannot read rows",
    )

"""The spec's gateway log (docs/evidence-bundle.md section 2) staged for gateway_typed.sql: JSON lines,
CSV and Parquet files as text columns, and a Parquet file whose columns already have the contract's types
(a zoned timestamp, signed integers) typed by plain casts instead, with the same checks and messages
(noted in InPlace: the gateway view reads its valid rows where they lie)."""

from __future__ import annotations

import duckdb

from forensics.contract import GATEWAY_FIELDS
from forensics.db import ident, sql_literal
from forensics.ingest.other_formats import type_and_keep
from forensics.ingest.rawtext import drop_json_lines, load_json_lines
from forensics.ingest.staged import InPlace, validate_staged
from forensics.intake import InputFile

FIELDS = GATEWAY_FIELDS
# the columns only other formats fill (forensics.gateway_formats); the spec's log has none of them
SPEC_EXTRAS = "NULL::VARCHAR AS engine_id, NULL::VARCHAR AS trace_id, NULL::VARCHAR AS attrs"


def _stage_jsonl(con: duckdb.DuckDBPyConnection, f: InputFile) -> bool:
    if not load_json_lines(con, f):
        return False
    cols = ",\n".join(
        f"CASE WHEN ok THEN json_extract_string(line, '$.{c}') END AS {c}"
        if c != "headers"
        else "CASE WHEN ok THEN CAST(json_extract(line, '$.headers') AS VARCHAR) END AS headers"
        for c in FIELDS
    )
    con.execute(f"""CREATE OR REPLACE TEMP TABLE gw_stage AS
        SELECT row, parse_error, {cols}, {SPEC_EXTRAS} FROM json_lines""")
    drop_json_lines(con)
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
    cols = ", ".join((f"CAST({ident(c)} AS VARCHAR) AS {c}" if c in names else f"NULL::VARCHAR AS {c}") for c in FIELDS)
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP {'VIEW' if view else 'TABLE'} gw_stage AS SELECT {row_expr} AS row, "
            f"NULL::VARCHAR AS parse_error, {cols}, {SPEC_EXTRAS} FROM {reader}"
        )
    except duckdb.Error as err:
        f.error = f"cannot read rows: {str(err).splitlines()[0][:200]}"
        return False
    return True


SIGNED = {"BIGINT", "INTEGER", "SMALLINT", "TINYINT"}
NUMERIC = SIGNED | {"DOUBLE", "FLOAT"}
TEXT = {"VARCHAR", "JSON"}


def _typed_columns(types: dict[str, str]) -> str | None:
    """gw_typed's columns by plain casts when a Parquet file's columns have the contract's types
    (None otherwise: the file goes through the text path). Text columns are only built where a
    message needs them; a native value cannot fail to parse, so only the range checks remain."""

    def kind(col: str, allowed: set[str]) -> bool:
        return col not in types or types[col] in allowed

    if not (
        types.get("ts") == "TIMESTAMP WITH TIME ZONE"
        and all(kind(c, SIGNED) for c in ("status", "prompt_tokens", "completion_tokens", "bootstrap_room"))
        and kind("duration_ms", NUMERIC)
        and kind("headers", TEXT)
    ):
        return None

    def col(c: str) -> str:
        return ident(c) if c in types else "NULL"

    def text(c: str) -> str:
        return f"CAST({col(c)} AS VARCHAR)"

    status, room, headers = col("status"), col("bootstrap_room"), text("headers")
    return f"""CAST(ts AS TIMESTAMPTZ) AS ts_v, NULL::VARCHAR AS ts,
        nullif({text("request_id")}, '') AS request_id, nullif({text("account_id")}, '') AS account_id,
        {text("api_token_id")} AS api_token_id, {text("client_ip")} AS client_ip,
        {text("user_agent")} AS user_agent, {text("model")} AS model,
        CASE WHEN {status} BETWEEN 100 AND 999 THEN CAST({status} AS INTEGER) END AS status_v,
        CASE WHEN NOT {status} BETWEEN 100 AND 999 THEN CAST({status} AS VARCHAR) END AS status,
        CAST({col("prompt_tokens")} AS BIGINT) AS prompt_v, NULL::VARCHAR AS prompt_tokens,
        CAST({col("completion_tokens")} AS BIGINT) AS completion_v, NULL::VARCHAR AS completion_tokens,
        CAST({col("duration_ms")} AS DOUBLE) AS duration_v, NULL::VARCHAR AS duration_ms,
        CASE WHEN {room} >= 0 THEN CAST({room} AS BIGINT) END AS room_v,
        CASE WHEN {room} < 0 THEN CAST({room} AS VARCHAR) END AS bootstrap_room,
        nullif({text("prefill_node")}, '') AS prefill_node, nullif({text("decode_node")}, '') AS decode_node,
        CASE WHEN {headers} IS NULL OR trim({headers}) IN ('', 'null') THEN NULL
             WHEN json_valid({headers}) AND json_type({headers}) = 'OBJECT' THEN CAST({headers} AS JSON) END
             AS headers_v, {headers} AS headers, NULL::VARCHAR AS engine_id, NULL::VARCHAR AS trace_id,
        NULL::JSON AS attrs"""


def _typed_parquet(con: duckdb.DuckDBPyConnection, f: InputFile, reader: str, in_place: InPlace) -> bool | None:
    """Stage a Parquet file with the contract's types as gw_typed directly: True (noted in `in_place`),
    False (unreadable, f.error set), None (other types: take the text path)."""
    try:
        types = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()}
    except duckdb.Error as err:
        f.error = f"cannot read: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        return False
    columns = _typed_columns(types) if all(c in types for c in ("ts", "request_id", "account_id", "status")) else None
    if columns is None:
        return None
    con.execute(
        f"""CREATE OR REPLACE TEMP VIEW gw_typed AS
            SELECT file_row_number + 1 AS row, NULL::VARCHAR AS parse_error, {columns} FROM {reader}"""
    )
    in_place.add(f, tuple(sorted(types.items())), columns)
    return True


def load_spec_file(con: duckdb.DuckDBPyConnection, f: InputFile, in_place: InPlace) -> None:
    """The spec's gateway log (section 2)."""
    name = f.rel.lower()
    path = sql_literal(f.path)
    if name.endswith(".parquet"):
        reader = f"read_parquet({path}, file_row_number = true)"
        typed = _typed_parquet(con, f, reader, in_place)
        if typed is False:
            return
        if typed:
            validate_staged(
                con,
                f,
                "gateway_validate",
                "gw_typed",
                "gateway_text",
                "DROP VIEW IF EXISTS gw_typed",
                "cannot read rows",
                params={"gw_strict": True},
            )
            return
        ok = _stage_table(con, f, reader, "file_row_number + 1", view=True)
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
    type_and_keep(con, f, strict=True, stage="VIEW" if name.endswith(".parquet") else "TABLE")

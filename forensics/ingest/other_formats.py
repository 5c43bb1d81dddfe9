"""Ingest stage, gateway logs in other formats than the spec's (forensics.gateway_formats): each file's
records (gw_records: row, parse_error, rec as JSON text, or a CSV file's columns), then the paths the
format reads, each record parsed once (gw_values, forensics.ingest.formats), then the format's
projection into the spec's text columns (gw_stage), then the same typing and validation as the spec's log.

Records are: a JSON line as read; an element of a JSON array file; a Parquet row as DuckDB's to_json
makes it; a CSV row as its columns (as text: none turned into JSON and parsed back); a request grouped
from its lines, for a format that logs several per request (Mapping.grouped: SMG,
ingest/queries/gateway_smg_group/); what a format's own reader makes of the file (Mapping.reader: the
client-request spans of an OTLP file, whose SGLang spans go to engine_spans).
Where a format holds prompt and response text, forensics.ingest.content fingerprints it from gw_values
(the records that may hold some); the projection never selects it.
Reads: gateway/*. Writes: gateway_text, engine_spans, content_fingerprints, rejected.
"""

from __future__ import annotations

import json
import zlib

import duckdb
import pyarrow as pa

from forensics.db import arrow_view, ident, run_query, scalar, sql_literal
from forensics.gateway_formats import GatewaySettings, Mapping
from forensics.ingest import content
from forensics.ingest.damage import field_missing, lost_accounts, lost_tenant, no_account
from forensics.ingest.formats import needs_zone, project
from forensics.ingest.rawtext import drop_json_lines, load_json_lines, open_bytes
from forensics.ingest.staged import validate_staged
from forensics.intake import InputFile
from forensics.paths import load_query

SAMPLE_LINES = 200  # lines looked at to find a file's first records (blank or broken lines among them)
SAMPLE_RECORDS = 20  # records whose fields vote on the format: one malformed record does not decide it


def _kind(f: InputFile) -> str:
    name = f.rel.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    return "json"


def _csv_reader(f: InputFile) -> str:
    return (
        f"read_csv({sql_literal(f.path)}, header = true, all_varchar = true, parallel = false, quote = '\"', "
        "escape = '\"', strict_mode = false, null_padding = true, max_line_size = 67108864)"
    )


def _is_array(f: InputFile) -> bool:
    """A JSON file whose first character (after blanks) opens an array: /spend/logs and other exports."""
    try:
        with open_bytes(f) as fh:
            head = fh.read(4096).lstrip()
    except (OSError, EOFError, zlib.error):
        return False
    return head.startswith(b"[")


def sample_fields(con: duckdb.DuckDBPyConnection, f: InputFile) -> tuple[list[set[str]], dict | None] | None:
    """The field names a gateway file's format is recognised by: a table's columns, or the keys of each
    of its first JSON records (up to SAMPLE_RECORDS), with the first record. None (f.error set) when the
    file cannot be read at all."""
    kind = _kind(f)
    try:
        if kind in ("parquet", "csv"):
            reader = f"read_parquet({sql_literal(f.path)})" if kind == "parquet" else _csv_reader(f)
            names = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()}
            first = con.execute(f"SELECT to_json(t)::VARCHAR FROM (SELECT * FROM {reader} LIMIT 1) t").fetchone()
            return [names], (json.loads(first[0]) if first else None)
        if _is_array(f):
            records = [r for r in _array_records(f)[:SAMPLE_RECORDS] if isinstance(r, dict)]
        else:
            records = []
            with open_bytes(f) as fh:
                for _, raw in zip(range(SAMPLE_LINES), fh, strict=False):
                    try:
                        rec = json.loads(raw)
                    except (ValueError, UnicodeDecodeError, RecursionError):
                        continue
                    if isinstance(rec, dict):
                        records.append(rec)
                        if len(records) == SAMPLE_RECORDS:
                            break
        return [set(r) for r in records], (records[0] if records else None)
    except (duckdb.Error, OSError, EOFError, zlib.error, ValueError) as err:
        f.error = f"cannot read: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        return None


def _array_records(f: InputFile) -> list:
    with open_bytes(f) as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError("a JSON file that is not an array of records")
    return data


def _stage_records(con: duckdb.DuckDBPyConnection, f: InputFile, m: Mapping) -> tuple[bool, dict[str, str] | None]:
    """gw_records(row, parse_error, rec) for one file, or for a CSV file (row, parse_error, c0, c1, ...):
    its columns as read, none turned into JSON; False (f.error set) when it cannot be read. The
    second value: a CSV file's header, name -> its column."""
    kind = _kind(f)
    try:
        if kind == "parquet":
            con.execute(f"""CREATE OR REPLACE TEMP TABLE gw_records AS
                SELECT file_row_number + 1 AS row, NULL::VARCHAR AS parse_error, to_json(t)::VARCHAR AS rec
                FROM read_parquet({sql_literal(f.path)}, file_row_number = true) t""")
            return True, None
        if kind == "csv":  # header on line 1: data row k is on line k + 1
            names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {_csv_reader(f)}").fetchall()]
            table = {n: f"c{i}" for i, n in enumerate(names)}
            cols = ", ".join(f"{ident(n)} AS {c}" for n, c in table.items())
            con.execute(f"""CREATE OR REPLACE TEMP TABLE gw_records AS
                SELECT (row_number() OVER ()) + 1 AS row, NULL::VARCHAR AS parse_error, {cols} FROM {_csv_reader(f)}""")
            return True, table
        if m.reader is not None:
            return _stage_read(con, f, m), None
        if _is_array(f):
            records = _array_records(f)
            table = pa.table(
                {
                    "row": pa.array(range(1, len(records) + 1), pa.int64()),
                    "parse_error": [None if isinstance(r, dict) else "not a JSON object" for r in records],
                    "rec": [json.dumps(r) if isinstance(r, dict) else None for r in records],
                }
            )
            with arrow_view(con, "array_records", table):
                con.execute("CREATE OR REPLACE TEMP TABLE gw_records AS SELECT * FROM array_records")
            return True, None
        if not load_json_lines(con, f):
            return False, None
        # a format that logs prompts: a broken line is not quoted in its rejection (it may hold text)
        error = (
            "CASE WHEN starts_with(parse_error, 'not a JSON object: ') THEN 'not a JSON object (not quoted: "
            "the format logs prompt text)' ELSE parse_error END"
            if m.carries_text
            else "parse_error"
        )
        con.execute(f"""CREATE OR REPLACE TEMP TABLE gw_records AS
            SELECT row, {error} AS parse_error, line AS rec FROM json_lines""")
        drop_json_lines(con)
        if m.grouped:  # SMG: one record per request from its lines
            return _group_smg(con, f), None
        return True, None
    except (duckdb.Error, OSError, EOFError, zlib.error, ValueError, RecursionError) as err:
        f.error = f"cannot read: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        return False, None


def _group_smg(con: duckdb.DuckDBPyConnection, f: InputFile) -> bool:
    """gw_records as one record per request (ingest/queries/gateway_smg_group/). False (the file skipped
    whole, the field named) when no line of a request names its request_id: nothing can be grouped."""
    lines = scalar(con, "SELECT count(*) FROM gw_records")
    requests, names = con.execute(load_query("ingest", "smg_request_lines")).fetchone() or (0, None)
    run_query(con, "ingest", "gateway_smg_group")
    unnamed = scalar(con, "SELECT count(*) FROM gw_records WHERE starts_with(parse_error, 'no request_id:')")
    grouped = scalar(con, "SELECT count(*) FROM smg_requests")
    if unnamed and not grouped:
        where = f"its {unnamed:,} lines of {requests:,} requests (by their 'started processing request' lines)"
        field_missing(f, "request_id", set(names or ()), requests or None, where)
        con.execute("DROP TABLE smg_requests; DROP TABLE gw_records")
        return False
    other = (
        lines
        - scalar(con, "SELECT count(*) FROM gw_records WHERE parse_error IS NOT NULL")
        - scalar(con, "SELECT coalesce(sum(lines), 0) FROM smg_requests")
    )
    f.rows_read += other  # lines of no request (start-up, health, workers): read, kept out
    f.rows_loaded += other
    f.notes.append(f"{lines} lines: {grouped} requests, {other} lines of no request")
    con.execute("DROP TABLE smg_requests")
    return True


def _stage_read(con: duckdb.DuckDBPyConnection, f: InputFile, m: Mapping) -> bool:
    """gw_records from the format's own reader of the file; the engine spans it names into engine_spans."""
    assert m.reader is not None
    with open_bytes(f) as fh:
        got = m.reader(fh, f.file_id)
    table = pa.table({"row": pa.array(got.rows, pa.int64()), "parse_error": pa.array(got.errors, pa.string()),
                      "rec": pa.array(got.recs, pa.string())})  # fmt: skip
    with arrow_view(con, "reader_records", table):
        con.execute("CREATE OR REPLACE TEMP TABLE gw_records AS SELECT * FROM reader_records")
    if got.engine_spans:
        con.executemany("INSERT INTO engine_spans VALUES (?, ?, ?, ?, ?, ?, ?)", got.engine_spans)
    # items of the file that are no client request (OTLP: engine spans, child spans): read and kept out
    f.rows_read += got.kept_out
    f.rows_loaded += got.kept_out
    f.notes.append(got.note)
    return True


def load_other_format(
    con: duckdb.DuckDBPyConnection, f: InputFile, m: Mapping, settings: GatewaySettings, first: dict | None
) -> None:
    """Stage, type and validate one file of format `m`; the good rows go into gateway_text."""
    if needs_zone(m, settings, _sample_ts(m, first)):
        f.error = (
            f"{m.doc}: its times carry no zone (e.g. {_sample_ts(m, first)!r}); say which zone they are in with "
            "[gateway] timezone in bundle.toml (or [time] timezone in the mapping)"
        )
        return
    staged, table = _stage_records(con, f, m)
    if not staged:
        return
    tenant = settings.tenant or m.tenant
    lost, said = lost_tenant(con, m, tenant, table)
    values, stage = project(m, settings, table, lost)
    con.execute(f"CREATE OR REPLACE TEMP TABLE gw_values AS {values}")
    con.execute("DROP TABLE gw_records")
    content.store_fingerprints(con, f, m)  # the text itself goes no further than gw_values
    con.execute(f"CREATE OR REPLACE TEMP TABLE gw_stage AS {stage}")
    con.execute("DROP TABLE gw_values")
    type_and_keep(con, f, strict=False)
    if said:
        lost_accounts(con, f, said)
    else:
        no_account(con, f, tenant)


def type_and_keep(con: duckdb.DuckDBPyConnection, f: InputFile, strict: bool, stage: str = "TABLE") -> None:
    """Type the staged text columns (gw_stage, a TABLE or VIEW), reject the bad rows, keep the good ones
    in gateway_text: every text-staged gateway file, in any format, goes through this. strict: the
    spec's format, whose records must name the account and the HTTP status (gateway_validate.sql)."""
    run_query(con, "ingest", "gateway_typed")
    validate_staged(
        con,
        f,
        "gateway_validate",
        "gw_stage",
        "gateway_text",
        f"DROP VIEW IF EXISTS gw_typed; DROP {stage} IF EXISTS gw_stage",
        "cannot read rows",
        "gateway_keep",
        params={"gw_strict": strict},
    )


def _sample_ts(m: Mapping, first: dict | None) -> str | None:
    """The first record's logged time, for the zone check (None when it cannot be found)."""
    if not first:
        return None
    for key in m.fields.get("ts", ()):
        v: object = first
        for k in key:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            return str(v)
    return None

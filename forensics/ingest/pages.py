"""Ingest stage, page events: Parquet / JSONL / JSONL.gz files into `page_events`, bad rows into `rejected`.

Every file is validated in one pass of DuckDB's readers (no Python loop touches a row); each bad row goes
to `rejected` with its reason. `page_events` is then a view (define_page_events): the valid rows of text
files, copied into `page_events_text`, and the valid rows of Parquet files, read in place. Copying
100M Parquet rows into the database cost about a minute and as much disk again; the view reads the files
where they lie, so incident.duckdb needs the bundle at the path it was read from (`investigate
--copy-events` makes a self-contained copy instead). Rows rejected later (duplicates, slots beyond the
pool) and rows outside --since/--until are filtered out by the view.
Reads: the files. Writes: page_events_text, page_events (view), rejected.
"""

from __future__ import annotations

import duckdb

from forensics.db import ident, sql_literal
from forensics.ingest.rawtext import drop_json_lines, load_json_lines
from forensics.ingest.staged import InPlace, validate_staged
from forensics.intake import InputFile, Window
from forensics.intake.damage import Damage
from forensics.paths import load_query

INT_TYPES = {"BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT", "HUGEINT"}
TEXT_INT = r"^\s*-?[0-9]+\s*$"
ZONED = r"(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$"
FIELDS = ("node", "seq", "ts", "op", "room", "start", "end", "peer", "src")


def _int_expr(col: str, typ: str | None) -> tuple[str, str]:
    """(typed value, raw text) expressions for an integer column of the given source type."""
    if typ is None:
        return "NULL::BIGINT", "NULL"
    c = ident(col)
    if typ in INT_TYPES:
        return f"TRY_CAST({c} AS BIGINT)", f"CAST({c} AS VARCHAR)"
    text = f"CAST({c} AS VARCHAR)"
    return f"CASE WHEN regexp_matches({text}, '{TEXT_INT}') THEN TRY_CAST(trim({text}) AS BIGINT) END", text


def _ts_expr(col: str, typ: str | None) -> tuple[str, str]:
    if typ is None:
        return "NULL::TIMESTAMPTZ", "NULL"
    c = ident(col)
    if typ.startswith("TIMESTAMP"):  # Parquet timestamps are UTC by the contract
        return f"CAST({c} AS TIMESTAMPTZ)", f"CAST({c} AS VARCHAR)"
    text = f"CAST({c} AS VARCHAR)"
    return f"CASE WHEN regexp_matches({text}, '{ZONED}') THEN TRY_CAST({text} AS TIMESTAMPTZ) END", text


def _typed_columns(types: dict[str, str]) -> str:
    seq, seq_raw = _int_expr("seq", types.get("seq"))
    room, room_raw = _int_expr("room", types.get("room"))
    start, _ = _int_expr("start", types.get("start"))
    end, _ = _int_expr("end", types.get("end"))
    ts, ts_raw = _ts_expr("ts", types.get("ts"))
    peer = f"CAST({ident('peer')} AS VARCHAR)" if "peer" in types else "NULL::VARCHAR"
    srcc = f"CAST({ident('src')} AS VARCHAR)" if "src" in types else "NULL::VARCHAR"
    return f"""CAST(node AS VARCHAR) AS node, {seq} AS seq, {seq_raw} AS seq_raw, {ts} AS ts, {ts_raw} AS ts_raw,
        CAST(op AS VARCHAR) AS op, {room} AS room, {room_raw} AS room_raw, {start} AS start, {end} AS "end",
        {peer} AS peer, {srcc} AS src"""


def _unreadable_parquet(f: InputFile) -> Damage:
    """A Parquet file DuckDB cannot open: cut short when it does not end in Parquet's magic bytes (the
    footer, which locates every row group, is written last), else unreadable. Neither says how many
    events it held."""
    try:
        with f.path.open("rb") as fh:
            fh.seek(max(f.path.stat().st_size - 4, 0))
            cut = fh.read(4) != b"PAR1"
    except OSError:
        cut = False
    if cut:
        return Damage(
            "page_file_cut",
            f"the Parquet file is cut short: it ends at byte {f.bytes:,} without the footer that locates its "
            "rows, so none of its page events can be read",
        )
    return Damage("unreadable", f"not read: {f.error}")


def _stage_parquet(con: duckdb.DuckDBPyConnection, f: InputFile, parquet: InPlace) -> bool:
    src = f"read_parquet({sql_literal(f.path)}, file_row_number = true)"
    try:
        types = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
    except duckdb.Error as err:
        f.error = f"not a readable Parquet file: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        f.damage.append(_unreadable_parquet(f))
        return False
    missing = [c for c in ("node", "seq", "ts", "op", "room", "start", "end") if c not in types]
    if missing:
        has = ", ".join(sorted(t for t in types if t != "file_row_number"))
        f.error = f"wrong schema: missing column(s) {', '.join(missing)} (has {has})"
        f.damage.append(Damage("skipped_file", f"skipped whole, page event column(s) {', '.join(missing)} missing"))
        return False
    layout = tuple(sorted(types.items()))
    columns = _typed_columns(types)
    try:
        # a view, not a table: the file is read once for the rejected rows and once for the loaded
        # ones, and the raw text of a value is only built for the rows a message needs it for
        con.execute(
            f"""CREATE OR REPLACE TEMP VIEW pages_stage AS SELECT file_row_number + 1 AS row,
            NULL::VARCHAR AS parse_error, {columns} FROM {src}"""
        )
    except duckdb.Error as err:
        f.error = f"cannot read Parquet rows: {str(err).splitlines()[0][:200]}"
        return False
    parquet.add(f, layout, columns)
    return True


def _stage_jsonl(con: duckdb.DuckDBPyConnection, f: InputFile) -> bool:
    if not load_json_lines(con, f):
        return False
    con.execute(load_query("ingest", "pages_stage_jsonl"), {"zoned": ZONED})
    drop_json_lines(con)
    return True


def load_page_file(con: duckdb.DuckDBPyConnection, f: InputFile, parquet: InPlace) -> None:
    """Validate one page file: bad rows into `rejected`; a text file's good rows into page_events_text,
    a Parquet file's noted in `parquet` for the view to read in place."""
    is_parquet = f.rel.lower().endswith(".parquet")
    staged = _stage_parquet(con, f, parquet) if is_parquet else _stage_jsonl(con, f)
    if not staged:
        return
    validate_staged(
        con,
        f,
        "page_events_validate",
        "pages_stage",
        "page_events_text",
        f"DROP {'VIEW' if is_parquet else 'TABLE'} IF EXISTS pages_stage",
        "cannot read Parquet rows",
        None if is_parquet else "page_events_keep",
        "page_events_clean",
    )


def define_page_events(con: duckdb.DuckDBPyConnection, parquet: InPlace, window: Window | None = None) -> None:
    """(Re)create the page_events view: valid rows of text files and of readable Parquet files, less every
    row `rejected` names (checked only for files with rejected rows), inside `window` if it is active."""
    body = parquet.union(
        con,
        "page_events_text",
        'node, seq, ts, op, room, start, "end", peer, src, file_id, row',
        """node, seq, ts, op, room, start, "end", nullif(peer, '') AS peer, nullif(src, '') AS src""",
    )
    if window is not None and window.active:
        lo = f"TIMESTAMPTZ {sql_literal(window.since.isoformat())}" if window.since else "'-infinity'::TIMESTAMPTZ"
        hi = f"TIMESTAMPTZ {sql_literal(window.until.isoformat())}" if window.until else "'infinity'::TIMESTAMPTZ"
        body = f"SELECT * FROM ({body}) WHERE ts >= {lo} AND ts < {hi}"
    con.execute(f"CREATE OR REPLACE VIEW page_events AS {body}")

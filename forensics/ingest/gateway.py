"""Ingest stage, gateway request log: JSONL, JSONL.gz, CSV, CSV.gz and Parquet into `gateway`.

Text formats (and Parquet files whose columns are text or other types than the contract's) are staged
as text columns and typed by one query (ingest/queries/gateway_typed.sql), so every format is held
to the same contract. A Parquet file whose columns already have the contract's types (a zoned
timestamp, signed integers) is typed by plain casts instead, with the same checks and messages. Bad
rows go to `rejected`. `gateway` is then a view (define_gateway), like page_events: the good rows of
text files, copied into `gateway_text`, and those of typed Parquet files, read where they lie.
Records logged twice (every field equal) are rejected after all files are in (reject_repeated_records).
Reads: gateway/*. Writes: gateway_text, gateway (view), rejected.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pyarrow as pa

from forensics.contract import GATEWAY_FIELDS
from forensics.db import arrow_view, ident, run_query, scalar, sql_literal
from forensics.engines.sglang import DURATION_ROUNDING
from forensics.gateway_formats import FORMAT_NAMES, SPEC_FORMAT, GatewaySettings, detect
from forensics.ingest.damage import no_format
from forensics.ingest.gateway_assign import assign_open
from forensics.ingest.other_formats import load_other_format, sample_fields, type_and_keep
from forensics.ingest.rawtext import JSON_OBJECT_LINES, load_lines, salvaged
from forensics.ingest.staged import InPlace, validate_staged
from forensics.intake import InputFile

FIELDS = GATEWAY_FIELDS
# the columns only other formats fill (forensics.gateway_formats); the spec's log has none of them
SPEC_EXTRAS = "NULL::VARCHAR AS engine_id, NULL::VARCHAR AS trace_id, NULL::VARCHAR AS attrs"


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
        SELECT row, parse_error, {cols}, {SPEC_EXTRAS} FROM ({JSON_OBJECT_LINES})""")
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


def load_gateway_file(
    con: duckdb.DuckDBPyConnection, f: InputFile, in_place: InPlace, settings: GatewaySettings | None = None
) -> None:
    """Validate one gateway file in its format (named by bundle.toml, else recognised from its fields):
    bad rows into `rejected`; the good rows copied into gateway_text, or (a spec Parquet file with the
    contract's types) noted in `in_place` for the gateway view to read. A cut gzip file that a reader
    could not read (CSV, a JSON array, a format's own reader; the JSONL reader salvages its own) is
    read again up to its break (rawtext.salvaged): a failed read leaves no row behind, so it can be."""
    settings = settings or GatewaySettings()
    damage, notes = list(f.damage), list(f.notes)
    _load_file(con, f, in_place, settings)
    if f.error is None or any(d.kind == "stream_cut" for d in f.damage):
        return
    first, found = f.error, (f.damage, f.notes)
    f.damage, f.notes = damage, notes  # what the failed read found is found again, or not, on the salvage
    with salvaged(con, f) as cut:
        if cut:
            f.error = None
            _load_file(con, f, in_place, settings)
    if not cut:
        f.error, (f.damage, f.notes) = first, found


def _load_file(con: duckdb.DuckDBPyConnection, f: InputFile, in_place: InPlace, settings: GatewaySettings) -> None:
    sample = sample_fields(con, f)
    if sample is None:
        return
    names, first = sample
    # a JSON-lines file without a single JSON record is read as the spec's log: each line is then
    # rejected with its own reason (not JSON, empty, not UTF-8) rather than the file as a whole
    fmt = settings.format or (SPEC_FORMAT if not names else _vote([detect(n, settings.mapping) for n in names]))
    if fmt is None:
        shown = ", ".join(sorted(set().union(*names))[:25]) or "none"
        f.error = (
            f"matches no known gateway format (its fields: {shown}); name one in bundle.toml [gateway] format "
            f"({', '.join(FORMAT_NAMES)}) or give a mapping (docs/gateway-formats.md)"
        )
        no_format(con, f, set().union(*names), settings)
        return
    f.format = fmt
    if fmt == SPEC_FORMAT:
        _load_spec_file(con, f, in_place)
        return
    load_other_format(con, f, settings.mapping_of(fmt), settings, first)


def _vote(found: list[str | None]) -> str | None:
    """The format most of a file's first records have (ties: the first record's), None if none has one."""
    known = Counter(x for x in found if x is not None)  # counts in first-seen order: ties go to the first
    return known.most_common(1)[0][0] if known else None


def _load_spec_file(con: duckdb.DuckDBPyConnection, f: InputFile, in_place: InPlace) -> None:
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


def define_gateway(con: duckdb.DuckDBPyConnection, in_place: InPlace) -> None:
    """(Re)create the gateway view: rows copied from text files and the valid rows of typed Parquet files."""
    cols = (
        "request_id, ts, account_id, api_token_id, client_ip, user_agent, model, status, prompt_tokens, "
        "completion_tokens, duration_ms, bootstrap_room, prefill_node, decode_node, headers, engine_id, trace_id, "
        "attrs, file_id, row"
    )
    outer = (
        "request_id, ts_v AS ts, account_id, api_token_id, client_ip, user_agent, model, status_v AS status, "
        "prompt_v AS prompt_tokens, completion_v AS completion_tokens, duration_v AS duration_ms, "
        "room_v AS bootstrap_room, prefill_node, decode_node, headers_v AS headers, engine_id, trace_id, attrs"
    )
    body = in_place.union(con, "gateway_text", cols, outer)
    if _joined(con):
        # records without a room, joined to the engines' request logs (ingest/queries/gateway_join.sql)
        body = f"""SELECT g.* REPLACE (coalesce(g.bootstrap_room, j.room) AS bootstrap_room,
                        coalesce(g.prefill_node, j.prefill_node) AS prefill_node,
                        coalesce(g.decode_node, j.decode_node) AS decode_node)
                   FROM ({body}) g LEFT JOIN gateway_joined j USING (file_id, row)"""
    con.execute(f"CREATE OR REPLACE VIEW gateway AS {body}")


def reject_repeated_records(con: duckdb.DuckDBPyConnection, in_place: InPlace, paths: dict[int, str]) -> list[tuple]:
    """Gateway records logged twice (every field equal to an earlier record's) are rejected: one client
    request must count once. The request ids' hashes are sorted in numpy (0.6 s for 9M records, against
    1.6 s for an SQL aggregate); only when some hash repeats does the query that names each repeat
    (ingest/queries/gateway_dedupe.sql) run, over the records with those hashes. `paths`: file id ->
    the path the reason names. Returns (file_id, count) of the rejected rows; the gateway view is then
    redefined without them. Leaves gateway_repeats (request_id, records): the request ids still in more
    than one record (records that differ in some field), which the counts of requests take once."""
    con.execute("CREATE OR REPLACE TABLE gateway_repeats (request_id VARCHAR, records BIGINT)")
    h = np.asarray(con.execute("SELECT hash(request_id) AS h FROM gateway").fetchnumpy()["h"], dtype=np.uint64)
    h.sort()
    repeated = np.unique(h[1:][h[1:] == h[:-1]])
    del h
    if not repeated.size:
        return []
    with arrow_view(con, "repeated_hashes", pa.table({"h": repeated})):
        run_query(con, "ingest", "gateway_dedupe")
        moved = _reject_repeats(con, in_place, paths)
        con.execute("""INSERT INTO gateway_repeats SELECT request_id, count(*) FROM gateway
                       WHERE hash(request_id) IN (SELECT h FROM repeated_hashes) GROUP BY 1 HAVING count(*) > 1
                       ORDER BY 1""")
    return moved


def _reject_repeats(con: duckdb.DuckDBPyConnection, in_place: InPlace, paths: dict[int, str]) -> list[tuple]:
    """Rejects the exact repeats gateway_dedupe.sql found (gateway_dups) and redefines the view without them."""
    ids = sorted(paths)
    con.execute(
        """INSERT INTO rejected SELECT d.file_id, d.row,
           'duplicate gateway record: request_id ' || d.request_id || ' with every field as at ' || f.path || ' row ' ||
           d.first_row FROM gateway_dups d
           JOIN (SELECT unnest($ids) AS file_id, unnest($paths) AS path) f ON f.file_id = d.first_file""",
        {"ids": ids, "paths": [paths[i] for i in ids]},
    )
    moved = con.execute("SELECT file_id, count(*) FROM gateway_dups GROUP BY 1 ORDER BY 1").fetchall()
    con.execute("DROP TABLE gateway_dups")
    if moved:
        define_gateway(con, in_place)
    return moved


def _joined(con: duckdb.DuckDBPyConnection) -> bool:
    exists = scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gateway_joined'")
    return bool(exists) and bool(scalar(con, "SELECT count(*) FROM gateway_joined"))


EMPTY_JOIN = """
    CREATE OR REPLACE TABLE gateway_joined (file_id INTEGER, row BIGINT, room BIGINT, prefill_node VARCHAR,
                                            decode_node VARCHAR, how VARCHAR);
    CREATE OR REPLACE TABLE gateway_unjoined (file_id INTEGER, row BIGINT, request_id VARCHAR, rooms BIGINT,
        candidates BIGINT, reason VARCHAR);
    CREATE OR REPLACE TABLE gateway_clock (node VARCHAR, rooms BIGINT, lo_us BIGINT, hi_us BIGINT,
                                           consistent BOOLEAN);
    CREATE OR REPLACE TABLE room_candidates (room BIGINT, node VARCHAR, request_id VARCHAR, account_id VARCHAR,
                                             basis VARCHAR, candidates BIGINT)"""

# The time join's rules (ingest/queries/gateway_join/ steps 3 to 5). A gateway time is read to the
# millisecond: the formats log ms (LiteLLM's timestamp(3) columns and request_duration_ms, Envoy's
# %START_TIME(%FT%T.%3fZ)% and %DURATION%, the spec's RFC 3339 ms), rounded or cut.
GATEWAY_SLACK_US = 1000
# A failure's prompt_tokens is the gateway's own count of the messages (LiteLLM: litellm.token_counter,
# tiktoken for a model it does not know; BerriAI/litellm#37365), not the engine's input length under the
# model's tokenizer and chat template: lengths within a quarter (and 32 tokens) of each other agree, and
# lengths within a factor 2 may still be the same prompt (another script, another tokenizer): such a record
# contests a room, so that no other record is joined to it.
LENGTH_REL, LENGTH_ABS, LENGTH_FAR = 0.25, 32, 2.0


def join_gateway(con: duckdb.DuckDBPyConnection, in_place: InPlace, complete: bool = True) -> tuple[int, int]:
    """Records without a room joined to the engines' request logs by their ids, else by model, time window
    and prompt length (ingest/queries/gateway_join/), else by the assignment as a whole (forensics.ingest.
    gateway_assign; `complete`: the gateway log is whole, the assumption its forcing rests on); the gateway
    view then shows the room and nodes found, and room_candidates the records each open room may be.
    Returns (joined, not joined)."""
    if not scalar(con, "SELECT count(*) FROM gateway WHERE bootstrap_room IS NULL"):
        con.execute(EMPTY_JOIN)
        return 0, 0
    run_query(
        con,
        "ingest",
        "gateway_join",
        gw_slack_us=GATEWAY_SLACK_US,
        len_abs=LENGTH_ABS,
        len_rel=LENGTH_REL,
        len_far=LENGTH_FAR,
        duration_rounding_us=round(DURATION_ROUNDING * 1e6),
    )
    assign_open(con, complete)
    run_query(con, "ingest", "gateway_join_end")
    define_gateway(con, in_place)
    joined = scalar(con, "SELECT count(*) FROM gateway_joined")
    unjoined = scalar(con, "SELECT count(*) FROM gateway_unjoined")
    return int(joined), int(unjoined)


def gateway_join_summary(con: duckdb.DuckDBPyConnection) -> dict[str, object] | None:
    """The manifest's account of the join: records without a room, joined (by key, or by time), not joined
    (by reason), and the bounds the id-joined records put on each node's clock against the gateway's
    (microseconds, node minus gateway; null where they leave no room for an offset). None when every
    record named its room."""
    joined = con.execute("SELECT how, count(*) FROM gateway_joined GROUP BY 1 ORDER BY 1").fetchall()
    unjoined = con.execute(
        """SELECT CASE WHEN rooms > 0 THEN 'its ids name several rooms'
                       WHEN candidates = 0 THEN 'no engine request log names it, and none agrees in time and length'
                       ELSE 'no engine request log names it, and time and length find no single one' END, count(*)
           FROM gateway_unjoined GROUP BY 1 ORDER BY 1"""
    ).fetchall()
    if not joined and not unjoined:
        return None
    clock = con.execute("SELECT node, lo_us, hi_us, consistent FROM gateway_clock ORDER BY node").fetchall()
    return {
        "records_without_room": sum(n for _, n in joined) + sum(n for _, n in unjoined),
        "joined": {how: n for how, n in joined},
        "not_joined": {why: n for why, n in unjoined},
        "gateway_clock_us": {node: [lo, hi] if ok else None for node, lo, hi, ok in clock},
        "listed_in": "gateway_join.csv",
    }

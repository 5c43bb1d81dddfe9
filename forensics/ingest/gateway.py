"""Ingest stage, gateway request log: JSONL, JSONL.gz, CSV, CSV.gz and Parquet into `gateway`.

Text formats (and Parquet files whose columns are text or other types than the contract's) are staged
as text columns and typed by one query (ingest/queries/gateway_typed.sql), so every format is held
to the same contract. A Parquet file whose columns already have the contract's types (a zoned
timestamp, signed integers) is typed by plain casts instead, with the same checks and messages (the
spec's log: gateway_spec.py; other formats: other_formats.py). Bad rows go to `rejected`. `gateway`
is then a view (define_gateway), like page_events: the good rows of text files, copied into
`gateway_text`, and those of typed Parquet files, read where they lie.
Records logged twice (every field equal) are rejected after all files are in (reject_repeated_records).
Reads: gateway/*. Writes: gateway_text, gateway (view), rejected.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, run_query, scalar
from forensics.engines.sglang import DURATION_ROUNDING
from forensics.gateway_formats import FORMAT_NAMES, SPEC_FORMAT, GatewaySettings, detect
from forensics.ingest.damage import no_format
from forensics.ingest.gateway_assign import assign_open
from forensics.ingest.gateway_spec import load_spec_file
from forensics.ingest.other_formats import load_other_format, sample_fields
from forensics.ingest.rawtext import salvaged
from forensics.ingest.staged import InPlace
from forensics.intake import InputFile
from forensics.paths import load_query


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
        load_spec_file(con, f, in_place)
        return
    load_other_format(con, f, settings.mapping_of(fmt), settings, first)


def _vote(found: list[str | None]) -> str | None:
    """The format most of a file's first records have (ties: the first record's), None if none has one."""
    known = Counter(x for x in found if x is not None)  # counts in first-seen order: ties go to the first
    return known.most_common(1)[0][0] if known else None


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
        con.execute(load_query("ingest", "gateway_repeats"))
    return moved


def _reject_repeats(con: duckdb.DuckDBPyConnection, in_place: InPlace, paths: dict[int, str]) -> list[tuple]:
    """Rejects the exact repeats gateway_dedupe.sql found (gateway_dups) and redefines the view without them."""
    ids = sorted(paths)
    con.execute(load_query("ingest", "gateway_dups_rejected"), {"ids": ids, "paths": [paths[i] for i in ids]})
    moved = con.execute("SELECT file_id, count(*) FROM gateway_dups GROUP BY 1 ORDER BY 1").fetchall()
    con.execute("DROP TABLE gateway_dups")
    if moved:
        define_gateway(con, in_place)
    return moved


def _joined(con: duckdb.DuckDBPyConnection) -> bool:
    exists = scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gateway_joined'")
    return bool(exists) and bool(scalar(con, "SELECT count(*) FROM gateway_joined"))


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
    gateway_assign; `complete`: the gateway log is whole, the assumption its forcing rests on); a vLLM decode
    line's ids join the room its prefill blocks link it to (ingest/queries/vllm_block_links.sql); the gateway
    view then shows the room and nodes found, and room_candidates the records each open room may be.
    Returns (joined, not joined)."""
    if not scalar(con, "SELECT count(*) FROM gateway WHERE bootstrap_room IS NULL"):
        run_query(con, "ingest", "gateway_join_none")
        return 0, 0
    # a vLLM decode line's blocks give its record a room (vllm_block_links.sql): read only where lines name some
    vllm = scalar(
        con, "SELECT count(*) FROM engine_request_links WHERE role = 'decode' AND remote_block_ids IS NOT NULL"
    )
    run_query(con, "ingest", "vllm_block_links" if vllm else "vllm_block_links_none")
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
    unjoined = con.execute(load_query("ingest", "gateway_unjoined_reasons")).fetchall()
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

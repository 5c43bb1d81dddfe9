"""Ingest stage: every evidence file of a bundle into typed DuckDB tables, with row accounting.

Reads: the bundle. Writes: files, rejected, gateway, page_events, engine_lines, engine_requests,
node_config (see ingest/queries/schema/), input_duplicates, the temp table seq_jumps (every jump in a node's seq, for
the ownership stage's seq_gaps: forensics.ingest.seqs), and returns the manifest's input entries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from forensics.db import query_rows, run_query, thread_count, timed
from forensics.engines.facts import EngineRows
from forensics.engines.sglang_startup import NAME as SGLANG
from forensics.engines.vllm import NAME as VLLM
from forensics.errors import InputError
from forensics.ingest.bulk import load_engine_files
from forensics.ingest.damage import store_input_damage
from forensics.ingest.engine import load_integrity, store, store_integrity
from forensics.ingest.gateway import (
    GATEWAY_SLACK_US,
    define_gateway,
    join_gateway,
    load_gateway_file,
    reject_repeated_records,
)
from forensics.ingest.pages import define_page_events, load_page_file
from forensics.ingest.seqs import any_duplicate_seq, store_seq_jumps
from forensics.ingest.shipped import parse_shipped, store_shipped
from forensics.ingest.staged import InPlace
from forensics.ingest.startup import load_startup, node_engines, read_requests, reader_of, store_audit
from forensics.intake import BundleConfig, InputFile, Window, discover, load_bundle_config
from forensics.paths import load_query


def _reject_impossible_events(con: duckdb.DuckDBPyConnection, parquet: InPlace) -> list[tuple[int, int]]:
    """Duplicates and slots beyond the pool: rejected after all files are in (the page_events view then
    leaves them out). Returns (file_id, count)."""
    if any_duplicate_seq(con):  # rare: then name every duplicate and the row it repeats
        run_query(con, "ingest", "page_events_dedupe")
    else:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE page_dups (node VARCHAR, seq BIGINT, file_id INTEGER, row BIGINT,
               first_file INTEGER, first_row BIGINT)"""
        )
    con.execute("""INSERT INTO rejected SELECT file_id, row,
        'duplicate event: (node ' || node || ', seq ' || seq || ') already read at file ' || first_file ||
        ' row ' || first_row FROM page_dups""")
    define_page_events(con, parquet)
    _beyond_pool(con)
    con.execute("""INSERT INTO rejected SELECT file_id, row,
        'slots [' || start || ', ' || "end" || ') lie beyond the pool of node ' || pool_node || ' (' || pool_slots ||
        ' slots by its startup log)' || CASE WHEN op = 'transfer' THEN ', the receiver of this transfer' ELSE '' END
        FROM page_beyond""")
    define_page_events(con, parquet)
    moved: list[tuple[int, int]] = []
    for table in ("page_dups", "page_beyond"):
        moved += con.execute(f"SELECT file_id, count(*) FROM {table} GROUP BY 1 ORDER BY 1").fetchall()
        con.execute(f"DROP TABLE {table}")
    return moved


def _drop_engine_copies(con: duckdb.DuckDBPyConnection, by_id: dict[int, InputFile]) -> None:
    """Engine request lines delivered twice: the copies (engine_dups, ingest/queries/engine_duplicates.sql)
    leave engine_requests and count as read, not loaded; input_duplicates counts them per file."""
    run_query(con, "ingest", "engine_duplicates")
    for fid, n in con.execute("SELECT file_id, count(DISTINCT line) FROM engine_dups GROUP BY 1 ORDER BY 1").fetchall():
        by_id[fid].rows_loaded -= n
    con.execute("DELETE FROM engine_requests e USING engine_dups d WHERE e.file_id = d.file_id AND e.line = d.line")


def _beyond_pool(con: duckdb.DuckDBPyConnection) -> None:
    """page_beyond: the events whose slots lie beyond their pool, one query per node with a known pool
    (ingest/queries/page_events_beyond_pool.sql)."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE page_beyond (file_id INTEGER, row BIGINT, node VARCHAR, seq BIGINT,
           start BIGINT, "end" BIGINT, pool_slots BIGINT, pool_node VARCHAR, op VARCHAR)"""
    )
    pools = con.execute(
        """SELECT node, (pool_tokens // page_size + 1) * page_size FROM node_config
           WHERE pool_tokens IS NOT NULL AND page_size IS NOT NULL ORDER BY node"""
    ).fetchall()
    query = load_query("ingest", "page_events_beyond_pool")
    with timed("ingest/page_events_beyond_pool"):
        for node, pool_slots in pools:
            con.execute(query, {"node": node, "pool_slots": pool_slots})


def _apply_window(
    con: duckdb.DuckDBPyConnection, window: Window, by_id: dict[int, InputFile], parquet: InPlace
) -> None:
    """Page events stamped outside the replay window are counted per file and set aside (never silently)."""
    outside = """(ts < coalesce($since::TIMESTAMPTZ, '-infinity'::TIMESTAMPTZ)
                  OR ts >= coalesce($until::TIMESTAMPTZ, 'infinity'::TIMESTAMPTZ))"""
    counts = con.execute(
        f"SELECT file_id, count(*) FROM page_events WHERE {outside} GROUP BY 1",
        {"since": window.since, "until": window.until},
    ).fetchall()
    for fid, n in counts:
        by_id[fid].rows_loaded -= n
        by_id[fid].rows_outside_window += n
    define_page_events(con, parquet, window)


def _check_gateway(bundle: Path, gateway: list[InputFile]) -> None:
    """The run stops when no gateway log could be read (docs/evidence-bundle.md section 6), before the
    engine logs are read: one line naming each file and its problem (the fields it lacks, where the
    damage names them) and what the operator can do."""
    if not gateway:
        raise InputError(f"{bundle}: no gateway log (gateway/*.jsonl, *.jsonl.gz, *.csv, *.csv.gz, *.parquet)")
    if not all(f.error for f in gateway):
        return
    why = []
    for f in gateway:
        skip = next((d.detail for d in f.damage if d.kind == "skipped_file"), None)
        why.append(f"{f.rel}: {skip.removeprefix('skipped whole, ') if skip else f.error}")
    fields = any(d.kind == "skipped_file" for f in gateway for d in f.damage)
    todo = (
        "export the log again with the missing field, rename it back, or map it with a [gateway] mapping "
        "in bundle.toml (docs/gateway-formats.md)"
        if fields
        else "replace the file with a readable copy, or name its format in bundle.toml [gateway] format"
    )
    raise InputError(f"{bundle}: no gateway log could be read: {'; '.join(why)}. To go on: {todo}")


# what reads the plain engine files into the tables (load_engine_files, or its stand-in reading each node's
# files elsewhere: forensics.ownership.execution.engine_logs)
EngineLoader = Callable[[duckdb.DuckDBPyConnection, list[InputFile], ZoneInfo, EngineRows], None]


def ingest_into(
    con: duckdb.DuckDBPyConnection,
    bundle: Path,
    window: Window | None = None,
    config: BundleConfig | None = None,
    engine_loader: EngineLoader = load_engine_files,
) -> tuple[list[InputFile], BundleConfig]:
    """Every input file of `bundle` into `con`; `config`: its bundle.toml as the run read it (else read here);
    `engine_loader`: what reads the plain engine files (by default here, in this process)."""
    config = load_bundle_config(bundle) if config is None else config
    window = window or Window()
    with timed("ingest/discover"):  # lists the files and hashes each (SHA-256)
        files = discover(bundle, window, threads=thread_count(con))
    run_query(con, "ingest", "schema")
    con.execute("INSERT INTO replay_window VALUES (?, ?)", [window.since, window.until])
    con.execute("INSERT INTO engine_build VALUES (?)", [config.engine_version])
    engine_rows = EngineRows()
    shipped: list[dict[str, object]] = []  # shipped_lines (forensics.ingest.shipped)
    parquet = InPlace()
    gateway_files = InPlace()
    # the engine each node's logs name: SGLang's nodes are read by its readers, below; a node of another
    # engine by its start-up facts (forensics.ingest.startup)
    with timed("ingest/node_engines"):
        engines = node_engines([f for f in files if not (f.error or f.skipped)])
    other = {node: name for node, name in engines.items() if name != SGLANG}
    for f in files:
        if f.error or f.skipped:
            continue
        with timed(f"ingest/load_{f.source}"):
            if f.source == "gateway":
                load_gateway_file(con, f, gateway_files, config.gateway)
            elif f.source == "pages":
                load_page_file(con, f, parquet)
            elif f.source == "engine_log" and f.format and f.node not in other:  # inside a log shipper's export
                parse_shipped(f, config.log_timezone, engine_rows, shipped, config.shipper_node_labels,
                              config.shipper_nodes)  # fmt: skip
            elif f.source == "engine_log" and f.format and f.node and (dated := reader_of(other[f.node])):
                parse_shipped(f, config.log_timezone, engine_rows, shipped, config.shipper_node_labels,
                              config.shipper_nodes, dated)  # fmt: skip
    _check_gateway(bundle, [f for f in files if f.source == "gateway"])
    # plain engine logs and request logs: in batches of files (forensics.ingest.bulk)
    engine = [
        f for f in files
        if f.source in ("engine_log", "engine_requests") and not f.format and not (f.error or f.skipped)
        and (f.node not in other or f.source != "engine_log")
    ]  # fmt: skip
    with timed("ingest/load_engine"):
        engine_loader(con, engine, config.log_timezone, engine_rows)
    other_logs = {
        node: [f for f in files if f.node == node and f.source == "engine_log" and not (f.error or f.skipped)]
        for node in sorted(other)
    }
    read = {node for node, logs in other_logs.items() if read_requests(other[node], logs, config, engine_rows)}
    store(con, engine_rows)
    other_rows = EngineRows()
    for node, logs in other_logs.items():
        load_startup(con, node, other[node], logs, requests_read=node in read)
        if node not in read:  # a node its engine's reader read has its integrity rows from it, with their times
            load_integrity(logs, other_rows)
    store_integrity(con, other_rows)
    by_id = {f.file_id: f for f in files}
    for fid, lineno, reason in other_rows.rejected:
        con.execute("INSERT INTO rejected VALUES (?, ?, ?)", [fid, lineno, reason])
        by_id[fid].rows_loaded -= 1
        by_id[fid].rows_rejected += 1
    with timed("ingest/audit"):
        store_audit(con, bundle)
    store_shipped(con, shipped)
    with timed("ingest/engine_duplicates"):
        _drop_engine_copies(con, by_id)
    define_gateway(con, gateway_files)
    define_page_events(con, parquet)
    gateway_paths = {f.file_id: f.rel for f in files if f.source == "gateway"}
    with timed("ingest/gateway_repeats"):
        repeats = reject_repeated_records(con, gateway_files, gateway_paths)
    # the assignment as a whole forces pairs only where the gateway log is whole (forensics.ingest.
    # gateway_assign, A1): no gateway file unread or left out, no row rejected (exact repeats are not yet)
    whole = not any(f.error or f.skipped or f.rows_rejected for f in files if f.source == "gateway")
    with timed("ingest/gateway_join"):
        join_gateway(con, gateway_files, complete=whole)
    if con.execute("SELECT count(*) FROM node_config WHERE engine = ?", [VLLM]).fetchone() != (0,):
        # vLLM's lines name no room: its nodes' clocks are bounded by the ids its request lines carry
        run_query(con, "ingest", "vllm_clock", gw_slack_us=GATEWAY_SLACK_US)
    moved = _reject_impossible_events(con, parquet)
    for fid, n in repeats + moved:
        by_id[fid].rows_loaded -= n
        by_id[fid].rows_rejected += n
    if window.active:
        _apply_window(con, window, by_id, parquet)
    with timed("ingest/seq_jumps"):  # of the events as the analysis will read them: after the window
        store_seq_jumps(con, unchanged=not moved and not window.active)
    con.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                f.file_id,
                f.source,
                f.rel,
                f.node,
                f.sha256,
                f.bytes,
                f.rows_read,
                f.rows_loaded,
                f.rows_rejected,
                f.error,
                f.rows_outside_window,
                f.skipped,
            )
            for f in files
        ],
    )
    store_input_damage(con, files)
    with timed("ingest/input_duplicates"):  # lines delivered twice or out of order, per file
        # a shipper's export holds a node's files merged in shipping order: its order is not the engine's
        shipped_ids = [f.file_id for f in files if f.source == "engine_log" and f.format]
        run_query(con, "ingest", "input_duplicates", shipped=shipped_ids)
    con.execute("DROP TABLE engine_dups")
    return files, config


IN_PLACE = ("page_events", "gateway")  # views over the bundle's Parquet files (see forensics.ingest.pages)


def copy_in_place(con: duckdb.DuckDBPyConnection) -> None:
    """Replace the views that read the bundle in place by tables holding the same rows (--self-contained):
    the database then opens without the bundle. Views built on them (timeline) read the tables."""
    for view in IN_PLACE:
        con.execute(f"CREATE OR REPLACE TABLE {view}_copy AS SELECT * FROM {view}")
        con.execute(f"DROP VIEW {view}")
        con.execute(f"ALTER TABLE {view}_copy RENAME TO {view}")


def in_place_note(self_contained: bool) -> str:
    if self_contained:
        return "The database holds copies of the page events and gateway rows (--self-contained)."
    return (
        "The database reads page events and gateway rows from the bundle's Parquet files where they lie: "
        "keep the bundle at its path, or rerun with --self-contained."
    )


def node_summary(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(node, role, pool tokens, page size, context length, page events) per node."""
    return [tuple(r.values()) for r in query_rows(con, "ingest", "node_summary")]


def ingest_gateway(con: duckdb.DuckDBPyConnection, bundle: Path) -> list[InputFile]:
    """Only the bundle's gateway logs, into `gateway` (what the cohort preview needs)."""
    gateway = [f for f in discover(bundle) if f.source == "gateway" and not f.error]
    if not gateway:
        raise InputError(f"{bundle}: no readable gateway log (gateway/*.jsonl, *.csv, *.parquet, ...)")
    run_query(con, "ingest", "schema")
    in_place = InPlace()
    settings = load_bundle_config(bundle).gateway
    for f in gateway:
        load_gateway_file(con, f, in_place, settings)
    define_gateway(con, in_place)
    return gateway

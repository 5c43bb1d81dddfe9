"""Ingest stage, engine logs: SGLang server logs (text, with --log-requests lines) and --log-requests JSONL
into typed tables, whole files through the engine's line reader (forensics.engines.sglang.reader, derived
from its table of line shapes) where the bulk reader (forensics.ingest.bulk) does not read them, and the
rows of both stored.

Text logs carry no zone: their local time is read in the bundle's [engine] log_timezone.
Reads: engine/<node>/*.log, *.jsonl. Writes: engine_lines, engine_requests, engine_request_links (the
KV transfer a vLLM request line names), node_config, batch_stats (the periodic batch lines:
forensics.ingest.batch_lines), integrity_events (the engines' and their transfer libraries' integrity
lines: forensics.engines.integrity; of a node of another engine, by its line reader where it has one
(vLLM's), else by load_integrity), rejected.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.engines import integrity
from forensics.engines.facts import EngineRows, ReadLine
from forensics.engines.sglang.reader import READER
from forensics.ingest import batch_lines
from forensics.intake import InputFile


def parse_log(f: InputFile, tz: ZoneInfo, rows: EngineRows, read: ReadLine = READER.text) -> None:
    """A text log, line by line, through its engine's line reader."""
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            if read(raw, f.node, f.file_id, lineno, tz, rows):
                f.rows_loaded += 1
    f.rows_rejected = f.rows_read - f.rows_loaded


def load_integrity(files: list[InputFile], rows: EngineRows) -> None:
    """The integrity lines of a node of an engine without a line reader of its own (its start-up facts
    are read apart: forensics.ingest.startup); no time is read (read_text_line)."""
    for f in files:
        assert f.node is not None
        with f.path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                integrity.read_text_line(raw, f.node, f.file_id, lineno, rows)


def parse_requests_jsonl(f: InputFile, tz: ZoneInfo, rows: EngineRows, read: ReadLine = READER.json) -> None:
    """--log-requests-format json: a request.received and a request.finished record per request."""
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            if read(raw, f.node, f.file_id, lineno, tz, rows):
                f.rows_loaded += 1
    f.rows_rejected = f.rows_read - f.rows_loaded


LINE_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ts_resolution_ms", pa.int32()),
        ("rank", pa.string()),
        ("kind", pa.string()),
        ("message", pa.string()),
    ]
)
REQ_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("rid", pa.string()),
        ("room", pa.int64()),
        ("kind", pa.string()),
        ("input_len", pa.int64()),
        ("output_len", pa.int64()),
        ("max_input_len", pa.int64()),
        ("detail", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("forward_s", pa.float64()),
        ("start_time", pa.timestamp("us", tz="UTC")),
        ("prealloc_s", pa.float64()),
        ("transfer_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("bootstrap_s", pa.float64()),
        ("elapsed_s", pa.float64()),
        ("forwarded_id", pa.string()),
    ]
)
LINK_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("rid", pa.string()),
        ("role", pa.string()),
        ("remote_engine", pa.string()),
        ("remote_rid", pa.string()),
        ("remote_host", pa.string()),
        ("remote_port", pa.int64()),
        ("remote_block_ids", pa.string()),
    ]
)
CFG_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("rank", pa.string()),
        ("role", pa.string()),
        ("page_size", pa.int64()),
        ("context_len", pa.int64()),
        ("full_layer_tokens", pa.int64()),
        ("max_total_num_tokens", pa.int64()),
        ("allocated_tokens", pa.int64()),
        ("tp_size", pa.int64()),
        ("model_path", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
    ]
)
INTEGRITY_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("room", pa.int64()),
        ("request_id", pa.string()),
        ("remote_request_id", pa.string()),
        ("slot", pa.int64()),
        ("position", pa.int64()),
        ("stored_token", pa.int64()),
        ("expected_token", pa.int64()),
        ("block_ids", pa.list_(pa.int64())),
        ("num_blocks", pa.int64()),
        ("address", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("message", pa.string()),
    ]
)


def store(con: duckdb.DuckDBPyConnection, rows: EngineRows) -> None:
    lines = pa.Table.from_pylist(rows.lines, schema=LINE_SCHEMA)  # noqa: F841 (read by DuckDB)
    reqs = pa.Table.from_pylist(rows.requests, schema=REQ_SCHEMA)  # noqa: F841
    cfg_raw = pa.Table.from_pylist(rows.config, schema=CFG_SCHEMA)  # noqa: F841
    con.execute(
        "INSERT INTO engine_lines SELECT node, file_id, line, ts, ts_resolution_ms, rank, kind, message FROM lines"
    )
    con.execute(
        "INSERT INTO engine_requests SELECT node, rid, room, kind, input_len, output_len, max_input_len, "
        "detail, ts, file_id, line, forward_s, start_time, prealloc_s, transfer_s, queue_s, bootstrap_s, elapsed_s, "
        "forwarded_id FROM reqs"
    )
    # one row per node: the first value each startup line gave (a restart with other values is flagged
    # later); its pool is the pool rule's (forensics.engines.sglang): per rank, each source's first line
    # and the first source stated; the node's, the smallest rank's
    con.execute("""INSERT INTO node_config
        WITH ranks AS (
            SELECT node, sglang_rank_pool(
                       arg_min(full_layer_tokens, (file_id, line)) FILTER (WHERE full_layer_tokens IS NOT NULL),
                       arg_min(max_total_num_tokens, (file_id, line)) FILTER (WHERE max_total_num_tokens IS NOT NULL),
                       arg_min(allocated_tokens, (file_id, line)) FILTER (WHERE allocated_tokens IS NOT NULL)) AS pool
            FROM cfg_raw GROUP BY node, rank
        )
        SELECT node,
            arg_min(role, (file_id, line)) FILTER (WHERE role IS NOT NULL),
            arg_min(page_size, (file_id, line)) FILTER (WHERE page_size IS NOT NULL),
            arg_min(context_len, (file_id, line)) FILTER (WHERE context_len IS NOT NULL),
            (SELECT min(pool) FROM ranks r WHERE r.node = c.node),
            arg_min(full_layer_tokens, (file_id, line)) FILTER (WHERE full_layer_tokens IS NOT NULL),
            arg_min(max_total_num_tokens, (file_id, line)) FILTER (WHERE max_total_num_tokens IS NOT NULL),
            arg_min(allocated_tokens, (file_id, line)) FILTER (WHERE allocated_tokens IS NOT NULL),
            arg_min(tp_size, (file_id, line)) FILTER (WHERE tp_size IS NOT NULL),
            arg_min(model_path, (file_id, line)) FILTER (WHERE model_path IS NOT NULL),
            min(file_id), min(line), 'sglang'
        FROM cfg_raw c GROUP BY node""")
    if rows.links:  # vLLM's kv_transfer_params (forensics.engines.vllm.fields)
        links = pa.Table.from_pylist(rows.links, schema=LINK_SCHEMA)  # noqa: F841
        con.execute(f"INSERT INTO engine_request_links SELECT {', '.join(LINK_SCHEMA.names)} FROM links")
    batches = pa.Table.from_pylist(rows.batches, schema=batch_lines.SCHEMA)  # noqa: F841
    con.execute(f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches")
    store_integrity(con, rows)
    if rows.rejected:
        con.executemany("INSERT INTO rejected VALUES (?, ?, ?)", rows.rejected)


def store_integrity(con: duckdb.DuckDBPyConnection, rows: EngineRows) -> None:
    """integrity_events in the order of the lines (a line gives at most one row)."""
    events = pa.Table.from_pylist(rows.integrity, schema=INTEGRITY_SCHEMA)  # noqa: F841 (read by DuckDB)
    cols = ", ".join(INTEGRITY_SCHEMA.names)
    con.execute(f"INSERT INTO integrity_events SELECT {cols} FROM events ORDER BY file_id, line")
    rows.integrity.clear()

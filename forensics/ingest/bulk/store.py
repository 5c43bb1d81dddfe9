# ruff: noqa: E501  (SQL text: split lines would not read better)
"""The bulk reader's store (forensics.ingest.bulk): the SQL's rows of a batch of files and the Python
reader's, into engine_lines, engine_requests and batch_stats in the Python reader's order (file, line, row
of line)."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forensics.engines.facts import EngineRows
from forensics.ingest import batch_lines
from forensics.ingest.bulk.batch import BCOLS
from forensics.ingest.engine import LINE_SCHEMA, REQ_SCHEMA


def store_rows(con: duckdb.DuckDBPyConnection, loc: EngineRows) -> None:
    """Rows of the Python reader alone, in its order."""
    lines = pa.Table.from_pylist(loc.lines, schema=LINE_SCHEMA)  # noqa: F841 (read by DuckDB)
    reqs = pa.Table.from_pylist(loc.requests, schema=REQ_SCHEMA)  # noqa: F841
    batches = pa.Table.from_pylist(loc.batches, schema=batch_lines.SCHEMA)  # noqa: F841
    con.execute(
        "INSERT INTO engine_lines SELECT node, file_id, line, ts, ts_resolution_ms, rank, kind, message FROM lines"
    )
    con.execute(f"INSERT INTO engine_requests SELECT {', '.join(REQ_SCHEMA.names)} FROM reqs")
    con.execute(f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches")


def store_file(con: duckdb.DuckDBPyConnection, loc: EngineRows, text: bool) -> None:
    """The SQL's rows and the Python reader's, in the Python reader's order (file, line, row of line)."""
    fidx = pa.field("fidx", pa.int32())
    lines = pa.Table.from_pylist(loc.lines, schema=LINE_SCHEMA.append(fidx))  # noqa: F841 (read by DuckDB)
    reqs = pa.Table.from_pylist(  # noqa: F841
        [r | {"sub": i} for i, r in enumerate(loc.requests)],
        schema=REQ_SCHEMA.append(fidx).append(pa.field("sub", pa.int64())),
    )
    batches = pa.Table.from_pylist(loc.batches, schema=batch_lines.SCHEMA.append(fidx))  # noqa: F841
    none = "NULL::DOUBLE"
    if text:
        con.execute(
            f"""INSERT INTO engine_lines SELECT {", ".join(LINE_SCHEMA.names)} FROM (
                SELECT node, file_id, line, ts, res AS ts_resolution_ms, rank,
                    CASE shape WHEN 'plain' THEN NULL WHEN 'batch' THEN lower(regexp_extract(msg, '^(Prefill|Decode)', 1)) || '_batch'
                        ELSE shape END AS kind, left(msg, 4000) AS message, fidx
                FROM eng_pre JOIN eng_files USING (fidx) WHERE shape IS NOT NULL
                UNION ALL SELECT * FROM lines) ORDER BY fidx, line"""
        )
        con.execute(
            f"""INSERT INTO batch_stats SELECT {", ".join(batch_lines.SCHEMA.names)} FROM (
                SELECT node, file_id, line, ts, bkind AS kind, forward_ct, {", ".join(BCOLS)}, graph, fidx
                FROM eng_batch JOIN eng_files USING (fidx) WHERE ok
                UNION ALL SELECT * FROM batches) ORDER BY fidx, line"""
        )
        con.execute(
            f"""INSERT INTO engine_requests SELECT {", ".join(REQ_SCHEMA.names)} FROM (
                SELECT node, t.rid, t.room, 'time_stats' AS kind, input_len, output_len, NULL::BIGINT AS max_input_len,
                    detail, t.ts, file_id, t.line, forward_s, start_time, prealloc_s, transfer_s,
                    queue_s, bootstrap_s, {none} AS elapsed_s, NULL AS forwarded_id, t.fidx, 0 AS sub
                FROM eng_ts t JOIN eng_pre p ON p.fidx = t.fidx AND p.line = t.line AND p.shape = 'time_stats'
                JOIN eng_files f ON f.fidx = t.fidx
                UNION ALL
                SELECT node, CASE WHEN r.shape = 'received' THEN rid_s ELSE coalesce(nullif(rid_s, ''), nullif(meta_id, ''), '') END,
                    room, r.shape, CASE WHEN r.shape = 'finished' THEN prompt END,
                    CASE WHEN r.shape = 'finished' THEN compl END, NULL, CASE WHEN r.shape = 'finished' THEN detail END,
                    r.ts, file_id, r.line, {none}, NULL, {none}, {none}, {none}, {none}, {none}, NULL, r.fidx, 0
                FROM eng_req r JOIN eng_pre p ON p.fidx = r.fidx AND p.line = r.line AND p.shape IN ('received', 'finished')
                JOIN eng_files f ON f.fidx = r.fidx
                UNION ALL SELECT * FROM reqs) ORDER BY fidx, line, sub"""
        )
    else:
        con.execute(f"INSERT INTO engine_lines SELECT {', '.join(LINE_SCHEMA.names)} FROM lines ORDER BY fidx, line")
        con.execute(
            f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches ORDER BY fidx, line"
        )
        con.execute(
            f"""INSERT INTO engine_requests SELECT {", ".join(REQ_SCHEMA.names)} FROM (
                SELECT node, CASE WHEN event = 'request.received' THEN rid_s ELSE rid_fin END AS rid, room,
                    CASE WHEN event = 'request.received' THEN 'received' ELSE 'finished' END AS kind,
                    CASE WHEN event = 'request.received' THEN input_len ELSE prompt END AS input_len,
                    CASE WHEN event = 'request.finished' THEN compl END AS output_len, NULL::BIGINT AS max_input_len,
                    CASE WHEN event = 'request.finished' THEN detail END AS detail, q.ts, file_id, q.line,
                    {none} AS forward_s, NULL::TIMESTAMPTZ AS start_time, {none} AS prealloc_s, {none} AS transfer_s,
                    {none} AS queue_s, {none} AS bootstrap_s, {none} AS elapsed_s, forwarded_id, q.fidx, 0 AS sub
                FROM eng_req q JOIN eng_pre p ON p.fidx = q.fidx AND p.line = q.line AND p.shape = 'json'
                JOIN eng_files f ON f.fidx = q.fidx
                UNION ALL SELECT * FROM reqs) ORDER BY fidx, line, sub"""
        )

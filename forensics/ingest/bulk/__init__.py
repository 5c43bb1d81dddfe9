# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""Ingest stage, engine logs in bulk (issue #36): one SGLang log file at a time read by DuckDB's native
line reader, the line shapes every request writes typed by SQL regexes and JSON functions, and only
the other lines (start-up lines, failures, tracebacks, anything odd) given to the per-line Python reader
of forensics.ingest.engine, which stays the reference.

The SQL takes a line only when its strict pattern proves the Python reader would give the same rows:
  text logs: the `[ts rank] ` prefix; `Decode batch` / `Prefill batch` lines (printable ASCII) that the
  pattern of a template (batch_template: the kind and field names of a sample line) matches; `Req Time
  Stats(...)` lines whose durations are `name=number[ms]` pairs; `--log-requests` Receive and Finish
  lines whose values are plain literals (quotes, brackets and commas inside strings go to Python); any
  other line that holds none of the substrings some Python pattern or marker needs (engine_lines kind
  NULL);
  requests.jsonl: JSON objects without duplicate keys where they are read, a naive timestamp, simple
  finish reasons.
Everything else, and the rows of each file, keep the Python reader's order (file, line, row of line), so
engine_lines, engine_requests, batch_stats, node_config and rejected are the rows it gives
(tests/ingest/test_bulk_engine.py compares both on simulated, generated and real-line bundles).

Memory: one file's lines at a time (a temp table), never the run's. Plain files are read where they
lie; .gz and .zst rotated files are read in place by DuckDB's decompression (forensics.ingest.rawtext).
A plain file holding a carriage return, an ASCII record separator or a byte-order mark, or one that is
not UTF-8, is read whole by the Python reader (DuckDB's reader would split or trim those lines).

The package along the reader's steps: files.py (each plain file's bytes checked once, a batch of files
read by DuckDB, the audit's kept lines, the lines left to the per-line reader), text_sql.py and
json_sql.py (the SQL of each kind of file), batch.py (the batch lines by template), store.py (the rows in
the per-line reader's order); here the batches and each file's row accounting.
"""

from __future__ import annotations

import os
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.audit.sieved import Sieved
from forensics.db import timed
from forensics.engines.facts import EngineRows
from forensics.engines.sglang.reader import READER as LINES
from forensics.ingest.bulk.batch import batch_template
from forensics.ingest.bulk.files import COMPRESSED, flush, one_by_one, python_file, scan
from forensics.ingest.bulk.text_sql import TEXT_TIME_STATS
from forensics.intake import InputFile

__all__ = ["LINES", "READER", "TEXT_TIME_STATS", "batch_template", "load_engine_files"]

# KVF_ENGINE_READER=python reads every line with the per-line reader (the reference; the differential
# test and a user who suspects the bulk reader use it)
READER = os.environ.get("KVF_ENGINE_READER", "bulk")


BATCH_BYTES = 256 << 20  # the files read by one query: at most this many bytes (memory), or one file


def load_engine_files(con: duckdb.DuckDBPyConnection, files: list[InputFile], tz: ZoneInfo, rows: EngineRows) -> None:
    """The engine logs (text) and --log-requests JSONL files, in order, into engine_lines, engine_requests
    and batch_stats, a batch of files of one kind at a time; node_config and rejected rows go to `rows`
    (stored with the run's, by store)."""
    utc = str(tz) in ("UTC", "Etc/UTC")
    con.execute("CREATE OR REPLACE TEMP TABLE engine_read (file_id INTEGER, lines BIGINT)")  # lines read per file
    # text logs, then request logs: each kind in few batches (a query's cost is mostly per batch); the
    # Python reader's order of engine_requests (file, line, row of line) is restored after (_reorder)
    kinds = [[f for f in files if f.source == k] for k in ("engine_log", "engine_requests")]
    sieves: dict[int, Sieved | None] = {}  # the audit's sieve of each file read in bulk (scan)
    for group in kinds:
        batch: list[tuple[InputFile, bool]] = []
        size = 0
        for f in group:
            text = f.source == "engine_log"
            compressed = f.rel.lower().endswith(COMPRESSED)
            ends_nl = True
            whole = READER == "python" or not utc
            if not whole and not compressed:
                ok, ends_nl, sieves[f.file_id] = scan(f)
                whole = not ok
            if whole:
                flush(con, batch, tz, rows, sieves, LINES)
                batch, size = [], 0
                if compressed:
                    one_by_one(con, f, tz, rows, LINES, per_line=READER == "python")
                else:
                    python_file(con, f, tz, rows, text)
                continue
            if batch and size + f.bytes > BATCH_BYTES:
                flush(con, batch, tz, rows, sieves, LINES)
                batch, size = [], 0
            batch.append((f, ends_nl))
            size += f.bytes
        flush(con, batch, tz, rows, sieves, LINES)
    if all(kinds):
        _reorder(con)
    _account(con, files, rows)


def _account(con: duckdb.DuckDBPyConnection, files: list[InputFile], rows: EngineRows) -> None:
    """Each file's rows read, rejected and loaded, in one query from what the readers kept: read, its
    lines (engine_read) and a gzip stream's cut (the rejected row without a line, rawtext); rejected, its
    rejected rows (the readers' in `rows`, the cut's in the table); loaded, the others (every line a reader
    does not reject gives rows or is read and kept out)."""
    ids = pa.table({"file_id": pa.array([f.file_id for f in files], pa.int32())})  # noqa: F841 (read by DuckDB)
    rej = pa.table(  # noqa: F841
        {
            "file_id": pa.array([r[0] for r in rows.rejected], pa.int32()),
            "row": pa.array([r[1] for r in rows.rejected], pa.int64()),
        }
    )
    got = con.execute(
        """WITH r AS (SELECT file_id, sum(lines) AS lines FROM engine_read GROUP BY file_id),
                j AS (SELECT file_id, count(*) AS n, count(*) FILTER (WHERE row IS NULL) AS cut FROM (
                        SELECT file_id, row FROM rej UNION ALL SELECT file_id, row FROM rejected) GROUP BY file_id)
           SELECT file_id, coalesce(lines, 0) + coalesce(cut, 0), coalesce(n, 0) FROM ids LEFT JOIN r USING (file_id)
           LEFT JOIN j USING (file_id)"""
    ).fetchall()
    by_id = {f.file_id: f for f in files}
    for fid, read, rejected in got:
        f = by_id[fid]
        f.rows_read, f.rows_rejected, f.rows_loaded = read, rejected, read - rejected
    con.execute("DROP TABLE engine_read")


def _reorder(con: duckdb.DuckDBPyConnection) -> None:
    """engine_requests in the order the Python reader adds its rows: by file (file_id is the files'
    order), line, then the order a line's rows were added (rowid)."""
    with timed("ingest/engine_requests_order"):
        con.execute(
            "CREATE OR REPLACE TEMP TABLE eng_req_sorted AS SELECT * FROM engine_requests ORDER BY file_id, line, rowid"
        )
        con.execute("DELETE FROM engine_requests")
        con.execute("INSERT INTO engine_requests SELECT * FROM eng_req_sorted")
        con.execute("DROP TABLE eng_req_sorted")

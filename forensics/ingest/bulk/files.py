# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""The bulk reader's passes over a batch of files (forensics.ingest.bulk): what a plain file's bytes allow
(scan), the batch read by DuckDB's line reader, the audit's kept lines, the SQL of its kind, the lines
it leaves through the per-line reader (`lines`, the engine's LineReader), and the rows stored."""

from __future__ import annotations

import mmap
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.audit import SIEVE
from forensics.audit.sieved import Sieved, kept_from, plain_bytes, sql_sieved
from forensics.db import timed
from forensics.engines.facts import EngineRows, LineReader
from forensics.ingest import rawtext
from forensics.ingest.bulk.batch import read_batches
from forensics.ingest.bulk.json_sql import JSON_LINES, JSON_REQUESTS
from forensics.ingest.bulk.store import store_file, store_rows
from forensics.ingest.bulk.text_sql import TEXT_LINES, TEXT_REQUESTS, TEXT_TIME_STATS
from forensics.ingest.engine import parse_log, parse_requests_jsonl
from forensics.intake import InputFile

COMPRESSED = (".gz", ".zst")


def scan(f: InputFile) -> tuple[bool, bool, Sieved | None]:
    """One pass over a plain file's bytes for what each reader must know of them: (the bulk reader may
    read it, it ends with a newline, the audit's sieve: forensics.audit.sieved.sql_sieved's answer, None
    where the audit reads the file itself). The bulk reader may read a file without a byte-order mark, a
    carriage return or a record separator, all of which the sieve's check finds among others."""
    size = f.path.stat().st_size
    if size == 0:
        return False, True, None
    with f.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        plain = plain_bytes(mm)
        ok = plain is not None or (mm[:3] != b"\xef\xbb\xbf" and mm.find(b"\r") < 0 and mm.find(b"\x1e") < 0)
        ends_nl = mm[size - 1 : size] == b"\n"
    if not ok or plain is None:
        return ok, ends_nl, None
    try:
        return ok, ends_nl, sql_sieved(f.path, plain)
    except OSError:  # the audit names the file and the error
        return ok, ends_nl, None


def flush(
    con: duckdb.DuckDBPyConnection,
    batch: list[tuple[InputFile, bool]],
    tz: ZoneInfo,
    rows: EngineRows,
    sieves: dict[int, Sieved | None],
    lines: LineReader,
) -> None:
    if not batch:
        return
    paths = [str(f.path) for f, _ in batch]
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE eng_raw0 AS SELECT filename, line FROM read_csv($paths, "
            "columns = {'line': 'VARCHAR'}, delim = chr(30), quote = '', escape = '', header = false, "
            f"auto_detect = false, parallel = false, max_line_size = {rawtext.MAX_LINE}, strict_mode = false, "
            "null_padding = true, new_line = '\\n', filename = true)",
            {"paths": paths},
        )
    except duckdb.Error:
        con.execute("DROP TABLE IF EXISTS eng_raw0")
        for f, _ in batch:  # one file cannot be read in bulk: each on its own
            one_by_one(con, f, tz, rows, lines, per_line=False)
        return
    files = pa.table(
        {
            "fidx": pa.array(range(len(batch)), pa.int32()),
            "filename": pa.array(paths, pa.string()),
            "file_id": pa.array([f.file_id for f, _ in batch], pa.int32()),
            "node": pa.array([f.node for f, _ in batch], pa.string()),
        }
    )
    con.register("eng_files_arrow", files)
    con.execute("CREATE OR REPLACE TEMP TABLE eng_files AS SELECT * FROM eng_files_arrow")
    con.unregister("eng_files_arrow")
    con.execute("""CREATE OR REPLACE TEMP TABLE eng_raw AS
        WITH r AS (SELECT rowid AS r, filename, line FROM eng_raw0),
             s AS (SELECT filename, min(r) AS r0 FROM r GROUP BY filename)
        SELECT fidx, r - r0 + 1 AS line, line AS text FROM r JOIN s USING (filename) JOIN eng_files USING (filename)""")
    con.execute("DROP TABLE eng_raw0")
    with timed("ingest/engine_audit_lines"):
        _audit_lines(con, batch, sieves)
    _bulk(con, batch, tz, rows, lines)


def _audit_lines(
    con: duckdb.DuckDBPyConnection, batch: list[tuple[InputFile, bool]], sieves: dict[int, Sieved | None]
) -> None:
    """The lines the config audit reads of the batch's files, kept from eng_raw (forensics.audit.sieved.
    kept_from) for ingest's audit (forensics.ingest.startup.store_audit), which then reads none of these
    files again. A file DuckDB may not sieve (its sieve None: scan) the audit reads itself."""
    files = []
    for i, (f, _) in enumerate(batch):
        if (sieved := sieves.get(f.file_id)) is not None:
            files.append((i, str(f.path), sieved))
    if files:
        kept_from(con, "eng_raw", files, SIEVE)


def one_by_one(
    con: duckdb.DuckDBPyConnection, f: InputFile, tz: ZoneInfo, rows: EngineRows, lines: LineReader, *, per_line: bool
) -> None:
    """One file on its own: a compressed one through rawtext (a damaged gzip stream is salvaged, lines
    not UTF-8 are marked), a plain one that DuckDB cannot read through the Python reader."""
    text = f.source == "engine_log"
    if not f.rel.lower().endswith(COMPRESSED):
        return python_file(con, f, tz, rows, text)
    if not rawtext.load_lines(con, f, "eng_raw1"):
        return  # f.error says why
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eng_files AS SELECT 0::INTEGER AS fidx, $fid::INTEGER AS file_id, $node AS node",
        {"fid": f.file_id, "node": f.node},
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eng_raw AS SELECT 0::INTEGER AS fidx, rowid + 1 AS line, line AS text FROM eng_raw1"
    )
    con.execute("DROP TABLE eng_raw1")
    if str(tz) not in ("UTC", "Etc/UTC") or per_line:
        con.execute("CREATE OR REPLACE TEMP TABLE eng_pre AS SELECT fidx, line, text, NULL AS shape FROM eng_raw")
        counts = _counts(con, [(f, True)])
        loc = _python_lines(con, [(f, True)], counts, tz, rows, lines)
        store_rows(con, loc)
        _drop(con)
        return
    _bulk(con, [(f, True)], tz, rows, lines)


def _counts(con: duckdb.DuckDBPyConnection, batch: list[tuple[InputFile, bool]]) -> dict[int, int]:
    got = dict(con.execute("SELECT fidx, count(*) FROM eng_raw GROUP BY fidx").fetchall())
    con.execute(
        "INSERT INTO engine_read SELECT file_id, count(*) FROM eng_raw JOIN eng_files USING (fidx) GROUP BY file_id"
    )
    return {i: got.get(i, 0) for i in range(len(batch))}


def _bulk(
    con: duckdb.DuckDBPyConnection,
    batch: list[tuple[InputFile, bool]],
    tz: ZoneInfo,
    rows: EngineRows,
    lines: LineReader,
) -> None:
    text = batch[0][0].source == "engine_log"
    counts = _counts(con, batch)
    with timed("ingest/engine_lines_sql"):
        con.execute(TEXT_LINES if text else JSON_LINES)
    if text:
        with timed("ingest/engine_batch_sql"):
            read_batches(con)
        with timed("ingest/engine_time_stats_sql"):
            con.execute(TEXT_TIME_STATS)
        with timed("ingest/engine_requests_sql"):
            con.execute(TEXT_REQUESTS)
        # a taken line whose fields the SQL cannot vouch for goes back to the Python reader
        con.execute("""UPDATE eng_pre SET shape = NULL FROM (
            SELECT fidx, line FROM eng_batch WHERE NOT coalesce(ok, false) UNION ALL
            SELECT fidx, line FROM eng_ts WHERE NOT coalesce(ok, false) UNION ALL
            SELECT fidx, line FROM eng_req WHERE NOT coalesce(ok, false)) bad
            WHERE eng_pre.fidx = bad.fidx AND eng_pre.line = bad.line""")
    else:
        con.execute(JSON_REQUESTS)
        con.execute("""CREATE OR REPLACE TEMP TABLE eng_pre AS
            SELECT p.fidx, p.line, p.text, CASE WHEN coalesce(q.ok, false) OR (j.common_ok AND (j.event IS NULL
                OR j.event NOT IN ('request.received', 'request.finished'))) THEN 'json' END AS shape
            FROM eng_raw p LEFT JOIN eng_json j USING (fidx, line) LEFT JOIN eng_req q USING (fidx, line)""")
    with timed("ingest/engine_python_lines"):
        loc = _python_lines(con, batch, counts, tz, rows, lines)
    with timed("ingest/engine_store"):
        store_file(con, loc, text)
    _drop(con)


def _drop(con: duckdb.DuckDBPyConnection) -> None:
    for t in ("eng_raw", "eng_pre", "eng_json", "eng_batch", "eng_ts", "eng_req", "eng_files"):
        con.execute(f"DROP TABLE IF EXISTS {t}")


def _python_lines(
    con: duckdb.DuckDBPyConnection,
    batch: list[tuple[InputFile, bool]],
    counts: dict[int, int],
    tz: ZoneInfo,
    rows: EngineRows,
    lines: LineReader,
) -> EngineRows:
    """The lines of eng_pre the SQL did not take (shape NULL), through the Python reader; each row
    carries its file's index (fidx) for the store's order."""
    text = batch[0][0].source == "engine_log"
    loc = EngineRows()
    todo = con.execute("SELECT fidx, line, text FROM eng_pre WHERE shape IS NULL ORDER BY fidx, line").fetchall()
    parse = lines.text if text else lines.json
    marks = {"lines": 0, "requests": 0, "batches": 0}
    for fidx, lineno, line in todo:
        f, ends_nl = batch[fidx]
        assert f.node is not None
        if line is not None and line.startswith(rawtext.BAD_LINE):  # from the reader: not UTF-8, too long
            loc.rejected.append((f.file_id, lineno, line[1:]))
            continue
        raw = (line or "").encode() + (b"\n" if lineno < counts[fidx] or ends_nl else b"")
        parse(raw, f.node, f.file_id, lineno, tz, loc)  # a line it rejects is in loc.rejected
        for name in marks:
            got = getattr(loc, name)
            for r in got[marks[name] :]:
                r["fidx"] = fidx
            marks[name] = len(got)
    rows.config.extend(loc.config)
    rows.integrity.extend(loc.integrity)
    rows.rejected.extend(loc.rejected)
    return loc


def python_file(con: duckdb.DuckDBPyConnection, f: InputFile, tz: ZoneInfo, rows: EngineRows, text: bool) -> None:
    """The whole file through the Python reader (as before #36), stored at once."""
    loc = EngineRows()
    (parse_log if text else parse_requests_jsonl)(f, tz, loc)
    con.execute("INSERT INTO engine_read VALUES ($fid, $lines)", {"fid": f.file_id, "lines": f.rows_read})
    rows.config.extend(loc.config)
    rows.integrity.extend(loc.integrity)
    rows.rejected.extend(loc.rejected)
    store_rows(con, loc)

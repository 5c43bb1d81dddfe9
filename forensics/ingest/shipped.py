"""Ingest stage, engine logs that came out of a log shipper (forensics.intake.shippers): each engine line
inside the export goes through the same SGLang line reader as a plain log's line (forensics.engines.sglang.reader), with
its line number in the unwrapped stream; shipped_lines keeps the shipper's record, time and labels beside it.

A file in an engine/<node>/ folder is that node's; a file directly under engine/ takes each line's node from
the shipper's labels, in the order and with the renames of bundle.toml [shipper] (node_labels, nodes).
Reads: the shipped files. Writes: through EngineRows (engine_lines, engine_requests, ...) and shipped_lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.engines.facts import EngineRows, LineReader
from forensics.engines.sglang.reader import READER
from forensics.intake import InputFile
from forensics.intake.shippers import node_of, unwrap

SCHEMA = pa.schema(
    [
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("record", pa.int64()),
        ("format", pa.string()),
        ("node", pa.string()),
        ("shipped_at", pa.timestamp("us", tz="UTC")),
        ("pod", pa.string()),
        ("container", pa.string()),
        ("host", pa.string()),
        ("namespace", pa.string()),
        ("stream", pa.string()),
    ]
)


# a record whose month-day is in December (vLLM's `LEVEL 12-DD HH:MM:SS`)
_DECEMBER = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) 12-\d{2} ")


def _is_request_record(raw: bytes) -> bool:
    """An SGLang --log-requests-format json record (request.received / request.finished ...)."""
    if not raw.lstrip().startswith(b"{"):
        return False
    try:
        rec = json.loads(raw)
    except ValueError:
        return False
    return isinstance(rec, dict) and str(rec.get("event", "")).startswith("request.")


def parse_shipped(
    f: InputFile,
    tz: ZoneInfo,
    rows: EngineRows,
    shipped: list[dict[str, object]],
    node_labels: tuple[str, ...],
    node_names: dict[str, str],
    dated: Callable[[int | None], LineReader] | None = None,
) -> None:
    """Every engine line of a shipped file into `rows` (text lines and JSON request records alike), by
    SGLang's reader or, for a node of another engine, `dated`: its reader given the year of the
    shipper's time of each line (vLLM's times print none; a line shipped in January of a December
    time is a year older)."""
    assert f.format is not None
    nodes: set[str] = set()
    try:
        for s in unwrap(f.path, f.format):
            f.rows_read += 1
            node = f.node or node_of(s.labels, node_labels, node_names)
            if node is None:
                labels = ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items())) or "none"
                rows.rejected.append(
                    (f.file_id, s.line, f"no node: the file is in no engine/<node>/ folder and the shipper's labels "
                     f"({labels}) name none of {', '.join(node_labels)} (bundle.toml [shipper] node_labels)")
                )  # fmt: skip
                continue
            nodes.add(node)
            if dated is not None:
                at = s.shipped_at
                year = None if at is None else at.year - (at.month == 1 and bool(_DECEMBER.search(s.raw[:400])))
                reader = dated(year).text
            else:
                reader = READER.json if _is_request_record(s.raw) else READER.text
            if reader(s.raw, node, f.file_id, s.line, tz, rows):
                f.rows_loaded += 1
            shipped.append(
                {"file_id": f.file_id, "line": s.line, "record": s.record, "format": f.format, "node": node,
                 "shipped_at": s.shipped_at} | {k: s.labels.get(k) for k in SCHEMA.names[6:]}
            )  # fmt: skip
    except (OSError, ValueError, EOFError) as err:
        f.error = f"cannot read as a {f.format} export: {str(err)[:200]}"
    f.rows_rejected = f.rows_read - f.rows_loaded
    if f.node is None and nodes:
        f.notes.append(f"nodes from the shipper's labels: {', '.join(sorted(nodes))}")


def store_shipped(con: duckdb.DuckDBPyConnection, shipped: list[dict[str, object]]) -> None:
    shipped_rows = pa.Table.from_pylist(shipped, schema=SCHEMA)  # noqa: F841 (read by DuckDB)
    con.execute(f"INSERT INTO shipped_lines SELECT {', '.join(SCHEMA.names)} FROM shipped_rows")

"""Ingest stage, engine logs: SGLang server logs (text) and --log-requests JSONL into typed tables.

Text logs carry no zone: their local time is read in the bundle's [engine] log_timezone.
Reads: engine/<node>/*.log, *.jsonl. Writes: engine_lines, engine_requests, node_config, rejected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.engines.sglang import (
    BINDING_PRIORITY,
    CONTEXT_LEN,
    FORWARD_DURATION,
    MAX_TOTAL,
    OVERLENGTH,
    POOL,
    PREFIX,
    SERVER_ARG,
    SERVER_ARGS,
    START_TIME,
    TIME_STATS,
    XFER_FAILED,
    pool_kind,
)
from forensics.intake import InputFile

UTC = ZoneInfo("UTC")
MARKERS = (
    "server_args=ServerArgs(",
    "KV Cache",
    "max_total_num_tokens=",
    "Input length (",
    "Req Time Stats(",
    "failed for request rank=",
)


@dataclass
class EngineRows:
    lines: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    config: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[int, int, str]] = field(default_factory=list)


def _local_to_utc(ts: str, ms: str | None, tz: ZoneInfo) -> datetime:
    naive = datetime.strptime(ts + (ms or ".0"), "%Y-%m-%d %H:%M:%S.%f")
    return naive.replace(tzinfo=tz).astimezone(UTC)


def _unix(text: str) -> datetime | None:
    """A Unix time in seconds as a UTC time; None when it is out of range (no log line may end the run)."""
    try:
        return datetime.fromtimestamp(float(text), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _server_args(body: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in SERVER_ARG.finditer(body):
        val = m.group("val").strip()
        out.setdefault(m.group("key"), val[1:-1] if val[:1] in "'\"" else val)
    return out


INT64_MAX = (1 << 63) - 1


def _int(v: Any) -> int | None:
    """An int64, or None when `v` is not an integer or does not fit (no log line may overflow a column)."""
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if -INT64_MAX - 1 <= n <= INT64_MAX else None


def _num(v: Any) -> int:
    """An int64 from a field the regex matched as digits (SGLang prints some token counts with thousands
    separators); ValueError when it does not fit."""
    n = _int(v.replace(",", "") if isinstance(v, str) else v)
    if n is None:
        raise ValueError(f"number out of range: {str(v)[:40]}")
    return n


def _json_int(v: Any) -> bool:
    """A JSON integer that fits int64 (JSON true/false are not integers)."""
    return isinstance(v, int) and not isinstance(v, bool) and _int(v) is not None


def _parse_message(msg: str, base: dict[str, Any], rows: EngineRows) -> str | None:
    """Add what `msg` says to rows; return its kind, or None for a line we do not read."""
    if m := OVERLENGTH.search(msg):
        rows.requests.append(
            base
            | {
                "rid": m.group("rid") or m.group("rid2"),
                "room": None,
                "kind": "overlength",
                "input_len": _num(m.group("L")),
                "output_len": None,
                "max_input_len": _num(m.group("M")),
                "detail": None,
            }
        )
        return "overlength"
    if m := TIME_STATS.search(msg):
        room = m.group("room")
        rows.requests.append(
            base
            | {
                "rid": m.group("rid").strip("'\""),
                "room": None if room in (None, "None") else _num(room),
                "kind": "time_stats",
                "input_len": _num(m.group("inp")),
                "output_len": _num(m.group("out")),
                "max_input_len": None,
                "detail": m.group("type"),
                "forward_s": float(f["s"]) if (f := FORWARD_DURATION.search(msg, m.end())) else None,
                "start_time": _unix(st["s"]) if (st := START_TIME.search(msg, m.end())) else None,
            }
        )
        return "time_stats"
    if m := XFER_FAILED.search(msg):
        rows.requests.append(
            base
            | {
                "rid": m.group("rid") or m.group("rid2"),
                "room": _num(m.group("room")),
                "kind": f"{m.group('side').lower()}_{m.group('stage')}_failed",
                "input_len": None,
                "output_len": None,
                "max_input_len": None,
                "detail": (m.group("reason") or "")[:500],
            }
        )
        return "transfer_failed"
    cfg = {k: base[k] for k in ("node", "file_id", "line")}
    if m := SERVER_ARGS.search(msg):
        a = _server_args(m.group("body"))
        rows.config.append(
            cfg
            | {
                "role": a.get("disaggregation_mode") or "null",
                "page_size": _int(a.get("page_size")),
                "context_len": _int(a.get("context_length")),
                "pool_tokens": None,
                "max_total_num_tokens": None,
                "tp_size": _int(a.get("tp_size")),
                "model_path": a.get("model_path"),
            }
        )
        return "server_args"
    # the pool a request's KV lives in: the first exact pool line of a kind that binds (the audit's
    # rule: a sliding-window, state or draft pool, or a virtual pool's upper bound, is not it)
    if m := POOL.search(msg):
        if m.group("what") != "is allocated" or pool_kind(m.group("name"))[1] != BINDING_PRIORITY:
            return "kv_pool_not_binding"  # read, and known not to be the pool (forensics.audit weighs it)
        rows.config.append(
            cfg
            | {
                "role": None,
                "page_size": None,
                "context_len": None,
                "pool_tokens": _num(m.group("n")),
                "max_total_num_tokens": None,
                "tp_size": None,
                "model_path": None,
            }
        )
        return "kv_pool"
    if m := MAX_TOTAL.search(msg):
        ctx = CONTEXT_LEN.search(msg)
        rows.config.append(
            cfg
            | {
                "role": None,
                "page_size": None,
                "context_len": _num(ctx[1]) if ctx else None,
                "pool_tokens": None,
                "max_total_num_tokens": _num(m[1]),
                "tp_size": None,
                "model_path": None,
            }
        )
        return "max_total"
    return None


def parse_log(f: InputFile, tz: ZoneInfo, rows: EngineRows) -> None:
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            if b"\x00" in raw:
                rows.rejected.append((f.file_id, lineno, "binary data (NUL bytes) in a text log line"))
                continue
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            m = PREFIX.match(text)
            ts = rank = None
            res = None
            msg = text
            if m:
                try:
                    ts = _local_to_utc(m.group("ts"), m.group("ms"), tz)
                except (ValueError, OverflowError):
                    rows.rejected.append((f.file_id, lineno, f"bad timestamp in line prefix: {m.group('ts')}"))
                    continue
                res = 1 if m.group("ms") else 1000
                rank = m.group("rank").strip() or None
                msg = m.group("msg")
            base = {"node": f.node, "file_id": f.file_id, "line": lineno, "ts": ts}
            try:
                kind = _parse_message(msg, base, rows)
            except (ValueError, OverflowError) as err:
                rows.rejected.append((f.file_id, lineno, f"SGLang message with unusable fields ({err}): {msg[:120]}"))
                continue
            if kind is None and any(k in msg for k in MARKERS):
                rows.rejected.append(
                    (
                        f.file_id,
                        lineno,
                        "looks like an SGLang message the analysis reads, "
                        "but its fields could not be parsed: " + msg[:120],
                    )
                )
                continue
            rows.lines.append(
                {
                    "node": f.node,
                    "file_id": f.file_id,
                    "line": lineno,
                    "ts": ts,
                    "ts_resolution_ms": res,
                    "rank": rank,
                    "kind": kind,
                    "message": msg[:4000],
                }
            )
            f.rows_loaded += 1
    f.rows_rejected = f.rows_read - f.rows_loaded


def parse_requests_jsonl(f: InputFile, tz: ZoneInfo, rows: EngineRows) -> None:
    """--log-requests-format json: one request.finished record per request (other events are kept as read)."""
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            reason = None
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError, RecursionError) as err:
                rows.rejected.append((f.file_id, lineno, f"not a JSON object: {str(err)[:80]}"))
                continue
            if rec.get("event") != "request.finished":
                f.rows_loaded += 1  # received/other events: read and kept out of the request table
                continue
            try:
                ts = datetime.fromisoformat(str(rec["timestamp"]))
                ts = (ts.replace(tzinfo=tz) if ts.tzinfo is None else ts).astimezone(UTC)
                meta = rec.get("out", {}).get("meta_info", {})
                obj = rec.get("obj") or {}
                room = obj.get("bootstrap_room")
                if room is not None and not _json_int(room):
                    raise ValueError(f"bootstrap_room is not an integer: {str(room)[:40]}")
                prompt, compl = meta.get("prompt_tokens"), meta.get("completion_tokens")
                if not _json_int(prompt):
                    raise ValueError("out.meta_info.prompt_tokens missing or not an integer")
                rows.requests.append(
                    {
                        "node": f.node,
                        "rid": str(rec.get("rid") or meta.get("id") or ""),
                        "room": room,
                        "kind": "finished",
                        "input_len": prompt,
                        "output_len": compl if _json_int(compl) else None,
                        "max_input_len": None,
                        "detail": json.dumps(meta.get("finish_reason"), sort_keys=True)[:500],
                        "ts": ts,
                        "file_id": f.file_id,
                        "line": lineno,
                    }
                )
                f.rows_loaded += 1
            except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as err:
                reason = f"request.finished record unusable: {str(err)[:120]}"
                rows.rejected.append((f.file_id, lineno, reason))
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
    ]
)
CFG_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("role", pa.string()),
        ("page_size", pa.int64()),
        ("context_len", pa.int64()),
        ("pool_tokens", pa.int64()),
        ("max_total_num_tokens", pa.int64()),
        ("tp_size", pa.int64()),
        ("model_path", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
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
        "detail, ts, file_id, line, forward_s, start_time FROM reqs"
    )
    # one row per node: the first value each startup line gave (a restart with other values is flagged later)
    con.execute("""INSERT INTO node_config
        SELECT node,
            arg_min(role, (file_id, line)) FILTER (WHERE role IS NOT NULL),
            arg_min(page_size, (file_id, line)) FILTER (WHERE page_size IS NOT NULL),
            arg_min(context_len, (file_id, line)) FILTER (WHERE context_len IS NOT NULL),
            arg_min(pool_tokens, (file_id, line)) FILTER (WHERE pool_tokens IS NOT NULL),
            arg_min(max_total_num_tokens, (file_id, line)) FILTER (WHERE max_total_num_tokens IS NOT NULL),
            arg_min(tp_size, (file_id, line)) FILTER (WHERE tp_size IS NOT NULL),
            arg_min(model_path, (file_id, line)) FILTER (WHERE model_path IS NOT NULL),
            min(file_id), min(line)
        FROM cfg_raw GROUP BY node""")
    if rows.rejected:
        con.executemany("INSERT INTO rejected VALUES (?, ?, ?)", rows.rejected)

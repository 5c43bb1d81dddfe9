"""Ingest stage, engine logs: SGLang server logs (text, with --log-requests lines) and --log-requests JSONL
into typed tables.

Text logs carry no zone: their local time is read in the bundle's [engine] log_timezone.
Reads: engine/<node>/*.log, *.jsonl. Writes: engine_lines, engine_requests, node_config, batch_stats
(the periodic batch lines: forensics.ingest.batch_lines), rejected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.engines.sglang import (
    BATCH_LINE,
    BINDING_PRIORITY,
    CONTEXT_CORRUPTION,
    CONTEXT_LEN,
    DEFERRED_RELEASE_TIMEOUT,
    DURATION,
    KV_CHECKSUM_MISMATCH,
    KVPOLL_TIMEOUT,
    MAX_TOTAL,
    MIN_WALLCLOCK_S,
    OVERLENGTH,
    POOL,
    PREFILL_LOST,
    PREFIX,
    READ_MARKERS,
    REQUEST_LOG,
    SERVER_ARG,
    SERVER_ARGS,
    SERVER_READY,
    START_TIME,
    STARTUP,
    SWA_POOLS,
    TIME_STATS,
    XFER_FAILED,
    pool_kind,
)
from forensics.engines.sglang_reprs import int_list_len, py_value, read_fields
from forensics.ingest import batch_lines
from forensics.intake import InputFile

UTC = ZoneInfo("UTC")


@dataclass
class EngineRows:
    lines: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    config: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)  # batch_stats rows
    rejected: list[tuple[int, int, str]] = field(default_factory=list)


@lru_cache(maxsize=4096)
def _second_to_utc(ts: str, tz: ZoneInfo) -> datetime:
    """A local 'YYYY-MM-DD HH:MM:SS' in UTC: a log writes many lines per second, so each second is
    converted once (a zone's offset changes only on a whole second)."""
    return datetime.fromisoformat(ts).replace(tzinfo=tz).astimezone(UTC)


def _local_to_utc(ts: str, ms: str | None, tz: ZoneInfo) -> datetime:
    base = _second_to_utc(ts, tz)
    return base.replace(microsecond=int(ms[1:].ljust(6, "0"))) if ms else base


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


def _request(base: dict[str, Any], rid: str | None, room: int | None, kind: str, **cols: Any) -> dict[str, Any]:
    """An engine_requests row; the columns not given are NULL."""
    empty = {"input_len": None, "output_len": None, "max_input_len": None, "detail": None}
    return base | {"rid": rid, "room": room, "kind": kind} | empty | cols


def _room(v: Any) -> int | None:
    """A logged bootstrap_room (None: the request had none); ValueError when it is not an int64."""
    if v is not None and not _json_int(v):
        raise ValueError(f"bootstrap_room is not an integer: {str(v)[:40]}")
    return v


def _finished(base: dict[str, Any], rid: Any, room: Any, meta: Any) -> dict[str, Any]:
    """A request's finish: the same row from a JSON request.finished record and a text Finish line."""
    if not isinstance(meta, dict):
        raise ValueError("out.meta_info missing or not a dict")
    prompt, compl = meta.get("prompt_tokens"), meta.get("completion_tokens")
    if not _json_int(prompt):
        raise ValueError("out.meta_info.prompt_tokens missing or not an integer")
    return _request(
        base,
        str(rid or meta.get("id") or ""),
        _room(room),
        "finished",
        input_len=prompt,
        output_len=compl if _json_int(compl) else None,
        detail=json.dumps(meta.get("finish_reason"), sort_keys=True)[:500],
    )


def _received(base: dict[str, Any], rid: Any, room: Any, input_len: int | None) -> list[dict[str, Any]]:
    """A request's arrival: one row per rid (a batch request logs lists of rids and rooms)."""
    if isinstance(rid, list):
        rooms = room if isinstance(room, list) else [room] * len(rid)
        if len(rooms) != len(rid):
            raise ValueError("a batch's rid and bootstrap_room lists differ in length")
        return [row for r, rm in zip(rid, rooms, strict=True) for row in _received(base, r, rm, None)]
    if not isinstance(rid, str):
        raise ValueError(f"rid is not a string: {str(rid)[:40]}")
    return [_request(base, rid, _room(room), "received", input_len=input_len)]


def _dict_fields(text: str) -> dict[str, str]:
    """The items of a repr'd dict, each as its value's text."""
    text = text.strip()
    if not text.startswith("{"):
        raise ValueError(f"not a dict: {text[:40]}")
    items, end = read_fields(text, 1, keyed=True)
    if text[end:] != "}":
        raise ValueError("a dict does not end where it closes")
    return items


def _request_log(m: re.Match[str], msg: str, base: dict[str, Any], rows: EngineRows) -> str:
    """A --log-requests text line: Receive gives 'received' rows, Finish a 'finished' row. Only the
    top-level fields of obj count, so a prompt that quotes `rid=` or `bootstrap_room=` changes nothing."""
    obj, close = read_fields(msg, m.end())
    if not msg.startswith(")", close):
        raise ValueError(f"obj={m['cls']}( is not closed")
    rest: dict[str, str] = {}
    tail = close + 1
    if msg.startswith(", ", tail):
        rest, tail = read_fields(msg, tail + 2)
    if tail != len(msg):
        raise ValueError("text after the logged request")
    rid = py_value(obj["rid"]) if "rid" in obj else None
    room = py_value(obj.get("bootstrap_room", "None"))
    if m["event"] == "Receive":
        n = int_list_len(obj["input_ids"]) if "input_ids" in obj else None
        rows.requests.extend(_received(base, rid, room, n))
        return "received"
    if "out" not in rest:
        raise ValueError("a Finish line without out=")
    meta_text = _dict_fields(rest["out"]).get("meta_info")
    if meta_text is None:
        raise ValueError("out has no meta_info")
    # only the keys read are evaluated: the rest may hold values that are no Python literal (nan)
    meta = {k: py_value(v) for k, v in _dict_fields(meta_text).items() if k in FINISH_KEYS}
    rows.requests.append(_finished(base, rid if isinstance(rid, str) else None, room, meta))
    return "finished"


FINISH_KEYS = ("id", "finish_reason", "prompt_tokens", "completion_tokens")


def _time_stats(m: re.Match[str], msg: str, base: dict[str, Any]) -> dict[str, Any]:
    """A Req Time Stats line: the request's lengths and, by its type, how long each stage took."""
    dur: dict[str, float] = {}
    for d in DURATION.finditer(msg, m.end()):
        dur.setdefault(d["name"], float(d["v"]) / (1000 if d["ms"] else 1))
    kind = m.group("type")
    prealloc = bootstrap = transfer = None
    if kind == "decode":
        prealloc = dur.get("prealloc_duration", dur.get("prealloc_queue_duration"))
        if prealloc is None and "bootstrap_duration" in dur and "alloc_wait_duration" in dur:
            # 0.5.23 prints the two sub-phases instead of the whole prealloc wait
            prealloc = dur["bootstrap_duration"] + dur["alloc_wait_duration"]
        transfer = dur.get("transfer_duration")
    elif kind == "prefill":
        # the whole bootstrap-queue wait (0.4.9-0.5.4 bootstrap_duration, 0.5.11+ bootstrap_queue_duration);
        # 0.5.23 may print only the handshake part, as bootstrap_duration
        bootstrap = dur.get("bootstrap_queue_duration", dur.get("bootstrap_duration"))
    st = START_TIME.search(msg, m.end())
    room = m.group("room")
    return _request(
        base,
        m.group("rid").strip("'\""),
        None if room in (None, "None") else _num(room),
        "time_stats",
        input_len=_num(m.group("inp")),
        output_len=_num(m.group("out")),
        detail=kind,
        forward_s=dur.get("forward_duration"),
        start_time=_unix(st["s"]) if st and float(st["s"]) >= MIN_WALLCLOCK_S else None,
        prealloc_s=prealloc,
        transfer_s=transfer,
        queue_s=dur.get("queue_duration"),
        bootstrap_s=bootstrap,
    )


def _kvpoll_timeout(base: dict[str, Any], rid: str | None, t: re.Match[str]) -> dict[str, Any]:
    return _request(base, rid, _num(t["room"]), "kvpoll_timeout", detail=t["state"], elapsed_s=float(t["s"]))


# a node_config row's columns, each line giving some (rank: the record prefix's, for the pool rule)
EMPTY_CONFIG: dict[str, Any] = dict.fromkeys(
    ("role", "page_size", "context_len", "full_layer_tokens", "max_total_num_tokens", "allocated_tokens", "tp_size",
     "model_path")
)  # fmt: skip


def _parse_message(msg: str, base: dict[str, Any], rows: EngineRows, rank: str | None = None) -> str | None:
    """Add what `msg` says to rows; return its kind, or None for a line we do not read."""
    # first, and anchored: a logged request's prompt may quote any other line
    if m := REQUEST_LOG.match(msg):
        return _request_log(m, msg, base, rows)
    if m := BATCH_LINE.match(msg):  # anchored too: the periodic batch lines, the most frequent
        rows.batches.append(batch_lines.batch_row(m, base))
        return f"{m['kind'].lower()}_batch"
    if m := OVERLENGTH.search(msg):
        rows.requests.append(
            _request(
                base,
                m.group("rid") or m.group("rid2"),
                None,
                "overlength",
                input_len=_num(m.group("L")),
                max_input_len=_num(m.group("M")),
            )
        )
        return "overlength"
    if m := TIME_STATS.search(msg):
        rows.requests.append(_time_stats(m, msg, base))
        return "time_stats"
    if m := XFER_FAILED.search(msg):
        rid, reason = m.group("rid") or m.group("rid2"), m.group("reason") or ""
        kind = f"{m.group('side').lower()}_{m.group('stage')}_failed"
        room = _num(m.group("room")) if m.group("room") else None  # a line naming the rid alone has none
        rows.requests.append(_request(base, rid, room, kind, detail=reason[:500]))
        # a timeout is the failure's reason: the line says both that it failed and why
        if t := KVPOLL_TIMEOUT.search(reason):
            rows.requests.append(_kvpoll_timeout(base, rid, t))
        return "transfer_failed"
    if m := KVPOLL_TIMEOUT.search(msg):
        rows.requests.append(_kvpoll_timeout(base, None, m))
        return "kvpoll_timeout"
    if m := CONTEXT_CORRUPTION.search(msg):
        detail = f"received metadata from bootstrap_room={m['actual']}, metadata buffer index {m['idx']}"
        rows.requests.append(_request(base, m["rid"], _num(m["room"]), "context_corruption", detail=detail))
        return "context_corruption"
    if m := DEFERRED_RELEASE_TIMEOUT.search(msg):
        rows.requests.append(_request(base, None, _num(m["room"]), "deferred_release_timeout", elapsed_s=float(m["s"])))
        return "deferred_release_timeout"
    if m := KV_CHECKSUM_MISMATCH.search(msg):
        detail = f"expected={m['expected']} got={m['got']}" if m["expected"] else "on a peer rank"
        rows.requests.append(_request(base, m["rid"], _num(m["room"]), "kv_checksum_mismatch", detail=detail))
        return "kv_checksum_mismatch"
    if PREFILL_LOST.search(msg):
        return "prefill_connection_lost"
    if STARTUP.search(msg):
        return "startup"
    if SERVER_READY.search(msg):
        return "server_ready"
    cfg = {k: base[k] for k in ("node", "file_id", "line")} | {"rank": rank} | EMPTY_CONFIG
    if m := SERVER_ARGS.search(msg):
        a = _server_args(m.group("body"))
        rows.config.append(
            cfg
            | {
                "role": a.get("disaggregation_mode") or "null",
                "page_size": _int(a.get("page_size")),
                "context_len": _int(a.get("context_length")),
                "tp_size": _int(a.get("tp_size")),
                "model_path": a.get("model_path"),
            }
        )
        return "server_args"
    # the three sources of the pool rule (forensics.engines.sglang.POOL_SOURCES), each as the line gives it;
    # node_config.pool_tokens is the rule's pool (store)
    if "full_layer_tokens=" in msg and (m := SWA_POOLS.search(msg)):
        rows.config.append(cfg | {"full_layer_tokens": _num(m[1])})
        return "swa_pools"
    if m := POOL.search(msg):
        # a sliding-window, state or draft pool, or a virtual pool's upper bound, is no allocated_tokens
        if m.group("what") != "is allocated" or pool_kind(m.group("name"))[1] != BINDING_PRIORITY:
            return "kv_pool_not_binding"  # read, and known not to be the pool (forensics.audit weighs it)
        rows.config.append(cfg | {"allocated_tokens": _num(m.group("n"))})
        return "kv_pool"
    if m := MAX_TOTAL.search(msg):
        ctx = CONTEXT_LEN.search(msg)
        rows.config.append(cfg | {"context_len": _num(ctx[1]) if ctx else None, "max_total_num_tokens": _num(m[1])})
        return "max_total"
    return None


def parse_text_line(raw: bytes, node: str, file_id: int, lineno: int, tz: ZoneInfo, rows: EngineRows) -> bool:
    """One line of an SGLang text log into `rows` (its engine_lines row, and the request or config rows
    it gives). False when the line is rejected (the reason is in rows.rejected). investigate reads
    whole files through this; forensics watch feeds it line by line as the files grow."""
    if b"\x00" in raw:
        rows.rejected.append((file_id, lineno, "binary data (NUL bytes) in a text log line"))
        return False
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
            rows.rejected.append((file_id, lineno, f"bad timestamp in line prefix: {m.group('ts')}"))
            return False
        res = 1 if m.group("ms") else 1000
        rank = m.group("rank").strip() or None
        msg = m.group("msg")
    base = {"node": node, "file_id": file_id, "line": lineno, "ts": ts}
    try:
        kind = _parse_message(msg, base, rows, rank)
    except (ValueError, OverflowError) as err:
        rows.rejected.append((file_id, lineno, f"SGLang message with unusable fields ({err}): {msg[:120]}"))
        return False
    if kind is None and any(k in msg for k in READ_MARKERS):
        rows.rejected.append(
            (
                file_id,
                lineno,
                "looks like an SGLang message the analysis reads, but its fields could not be parsed: " + msg[:120],
            )
        )
        return False
    rows.lines.append(
        {
            "node": node,
            "file_id": file_id,
            "line": lineno,
            "ts": ts,
            "ts_resolution_ms": res,
            "rank": rank,
            "kind": kind,
            "message": msg[:4000],
        }
    )
    return True


def parse_log(f: InputFile, tz: ZoneInfo, rows: EngineRows) -> None:
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            if parse_text_line(raw, f.node, f.file_id, lineno, tz, rows):
                f.rows_loaded += 1
    f.rows_rejected = f.rows_read - f.rows_loaded


FORWARDED_HEADERS = ("x-request-id", "x-correlation-id")  # the ids a gateway forwards (SMG header_utils.rs)


def _forwarded(rec: dict[str, Any]) -> str | None:
    """The request id a gateway forwarded, where the record logs it: SGLang's request logger writes the
    headers named by SGLANG_LOG_REQUEST_HEADERS under "headers" (python/sglang/srt/utils/request_logger.py)."""
    headers = rec.get("headers")
    if isinstance(headers, dict):
        lower = {str(k).lower(): v for k, v in headers.items()}
        for h in FORWARDED_HEADERS:
            if isinstance(lower.get(h), str) and lower[h]:
                return lower[h][:200]
    return None


def parse_request_line(raw: bytes, node: str, file_id: int, lineno: int, tz: ZoneInfo, rows: EngineRows) -> bool:
    """One --log-requests-format json record into `rows`: a request.received or request.finished row;
    other events are read and kept out. False when the record is rejected (reason in rows.rejected)."""
    try:
        rec = json.loads(raw)
        if not isinstance(rec, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        rows.rejected.append((file_id, lineno, f"not a JSON object: {str(err)[:80]}"))
        return False
    event = rec.get("event")
    if event not in ("request.received", "request.finished"):
        return True  # other events: read and kept out of the request table
    try:
        ts = datetime.fromisoformat(str(rec["timestamp"]))
        ts = (ts.replace(tzinfo=tz) if ts.tzinfo is None else ts).astimezone(UTC)
        base = {"node": node, "ts": ts, "file_id": file_id, "line": lineno, "forwarded_id": _forwarded(rec)}
        obj = rec.get("obj") or {}
        if event == "request.received":
            ids = obj.get("input_ids")
            # a truncated list holds the string "..." (utils/request_logger): its length is unknown
            n = len(ids) if isinstance(ids, list) and all(_json_int(i) for i in ids) else None
            rows.requests.extend(_received(base, rec.get("rid"), obj.get("bootstrap_room"), n))
        else:
            meta = (rec.get("out") or {}).get("meta_info")
            rows.requests.append(_finished(base, rec.get("rid"), obj.get("bootstrap_room"), meta))
        return True
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as err:
        rows.rejected.append((file_id, lineno, f"{event} record unusable: {str(err)[:120]}"))
        return False


def parse_requests_jsonl(f: InputFile, tz: ZoneInfo, rows: EngineRows) -> None:
    """--log-requests-format json: a request.received and a request.finished record per request."""
    assert f.node is not None
    with f.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            f.rows_read += 1
            if parse_request_line(raw, f.node, f.file_id, lineno, tz, rows):
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
    batches = pa.Table.from_pylist(rows.batches, schema=batch_lines.SCHEMA)  # noqa: F841
    con.execute(f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches")
    if rows.rejected:
        con.executemany("INSERT INTO rejected VALUES (?, ?, ?)", rows.rejected)

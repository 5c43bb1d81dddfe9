"""The rows an SGLang line gives, as the shapes' row builders (forensics.engines.sglang.shapes) make them:
engine_requests rows, node_config rows and batch_stats rows, with the checks that reject a line whose
fields do not fit (ValueError, with the reason the caller stores beside the file and line)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines.sglang.rules import BATCH_FIELDS, BATCH_FLOATS, BATCH_REQUIRED, SERVER_ARG
from forensics.engines.sglang_reprs import read_fields

UTC = ZoneInfo("UTC")
Row = dict[str, Any]


def unix(text: str) -> datetime | None:
    """A Unix time in seconds as a UTC time; None when it is out of range (no log line may end the run)."""
    try:
        return datetime.fromtimestamp(float(text), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def server_args(body: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in SERVER_ARG.finditer(body):
        val = m.group("val").strip()
        out.setdefault(m.group("key"), val[1:-1] if val[:1] in "'\"" else val)
    return out


INT64_MAX = (1 << 63) - 1


def to_int(v: Any) -> int | None:
    """An int64, or None when `v` is not an integer or does not fit (no log line may overflow a column)."""
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if -INT64_MAX - 1 <= n <= INT64_MAX else None


def num(v: Any) -> int:
    """An int64 from a field the regex matched as digits (SGLang prints some token counts with thousands
    separators); ValueError when it does not fit."""
    n = to_int(v.replace(",", "") if isinstance(v, str) else v)
    if n is None:
        raise ValueError(f"number out of range: {str(v)[:40]}")
    return n


def json_int(v: Any) -> bool:
    """A JSON integer that fits int64 (JSON true/false are not integers)."""
    return isinstance(v, int) and not isinstance(v, bool) and to_int(v) is not None


def request(base: Row, rid: str | None, room: int | None, kind: str, **cols: Any) -> Row:
    """An engine_requests row; the columns not given are NULL."""
    empty = {"input_len": None, "output_len": None, "max_input_len": None, "detail": None}
    return base | {"rid": rid, "room": room, "kind": kind} | empty | cols


def room_of(v: Any) -> int | None:
    """A logged bootstrap_room (None: the request had none); ValueError when it is not an int64."""
    if v is not None and not json_int(v):
        raise ValueError(f"bootstrap_room is not an integer: {str(v)[:40]}")
    return v


def finished(base: Row, rid: Any, room: Any, meta: Any) -> Row:
    """A request's finish: the same row from a JSON request.finished record and a text Finish line."""
    if not isinstance(meta, dict):
        raise ValueError("out.meta_info missing or not a dict")
    prompt, compl = meta.get("prompt_tokens"), meta.get("completion_tokens")
    if not json_int(prompt):
        raise ValueError("out.meta_info.prompt_tokens missing or not an integer")
    return request(
        base,
        str(rid or meta.get("id") or ""),
        room_of(room),
        "finished",
        input_len=prompt,
        output_len=compl if json_int(compl) else None,
        detail=json.dumps(meta.get("finish_reason"), sort_keys=True)[:500],
    )


def received(base: Row, rid: Any, room: Any, input_len: int | None) -> list[Row]:
    """A request's arrival: one row per rid (a batch request logs lists of rids and rooms)."""
    if isinstance(rid, list):
        rooms = room if isinstance(room, list) else [room] * len(rid)
        if len(rooms) != len(rid):
            raise ValueError("a batch's rid and bootstrap_room lists differ in length")
        return [row for r, rm in zip(rid, rooms, strict=True) for row in received(base, r, rm, None)]
    if not isinstance(rid, str):
        raise ValueError(f"rid is not a string: {str(rid)[:40]}")
    return [request(base, rid, room_of(room), "received", input_len=input_len)]


def dict_fields(text: str) -> dict[str, str]:
    """The items of a repr'd dict, each as its value's text."""
    text = text.strip()
    if not text.startswith("{"):
        raise ValueError(f"not a dict: {text[:40]}")
    items, end = read_fields(text, 1, keyed=True)
    if text[end:] != "}":
        raise ValueError("a dict does not end where it closes")
    return items


# a node_config row's columns, each line giving some (rank: the record prefix's, for the pool rule)
EMPTY_CONFIG: Row = dict.fromkeys(
    ("role", "page_size", "context_len", "full_layer_tokens", "max_total_num_tokens", "allocated_tokens", "tp_size",
     "model_path")
)  # fmt: skip


def config(base: Row, rank: str | None, **cols: Any) -> Row:
    """A node_config row of the line `base` names; the columns not given are NULL."""
    return {k: base[k] for k in ("node", "file_id", "line")} | {"rank": rank} | EMPTY_CONFIG | cols


# --- the periodic batch lines: one batch_stats row per line, NULL where the line's release does not print
# a field (the field names of each release: BATCH_FIELDS) ---
BATCH_COLUMNS = (
    "forward_ct",
    "running_req",
    "tokens_used",
    "token_usage",
    "prealloc_usage",
    "prealloc_req",
    "transfer_req",
    "retracted_req",
    "queue_req",
    "new_seq",
    "new_token",
    "cached_token",
    "pending_token",
    "bootstrap_req",
    "inflight_req",
    "throughput",
)
_INT = re.compile(r"\d+")
_FLOAT = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|nan|inf")
_FULL = re.compile(r"full=(?P<v>[^,]+)")  # 0.4.9's hybrid pool: `#token: full=N, swa=M`


def batch_fields(body: str) -> list[tuple[str, str]]:
    """The `name: value` fields of a batch line's body, in order; a piece without `: ` (the `swa=M` of
    a hybrid pool) continues the field before it."""
    out: list[tuple[str, str]] = []
    for piece in body.rstrip(", ").split(", "):  # some releases end the line with ', '
        piece = piece.strip()
        if not piece:
            continue
        name, sep, value = piece.partition(": ")
        if sep:
            out.append((name, value.strip()))
        elif out:
            out[-1] = (out[-1][0], f"{out[-1][1]}, {piece}")
        else:
            raise ValueError(f"a batch line field without a name: {piece[:40]}")
    return out


def _batch_value(col: str, text: str) -> int | float:
    full = _FULL.match(text)
    if full:
        text = full["v"]
    if col in BATCH_FLOATS:
        if not _FLOAT.fullmatch(text):
            raise ValueError(f"{col} is not a number: {text[:40]}")
        return float(text)
    if not _INT.fullmatch(text) or int(text) > INT64_MAX:
        raise ValueError(f"{col} is not a count: {text[:40]}")
    return int(text)


def batch_row(m: re.Match[str], base: Row) -> Row:
    """A batch_stats row from a batch line's match; ValueError when a field it reads is not a number, is
    given twice, or a field every release prints is missing."""
    kind = m["kind"].lower()
    names = BATCH_FIELDS[kind]
    row: Row = dict.fromkeys(BATCH_COLUMNS) | {"graph": None}
    row["forward_ct"] = _batch_value("forward_ct", m["iter"]) if m["iter"] else None
    seen: set[str] = set()
    for name, text in batch_fields(m["body"]):
        if name.endswith(" graph"):  # cuda graph, cpu graph, npu graph, musa graph
            if text not in ("True", "False"):
                raise ValueError(f"{name} is not True or False: {text[:40]}")
            row["graph"] = text == "True"
            continue
        col = names.get(name)
        if col is None:
            continue  # a field the analysis does not use (accept len, swa token usage, TFLOPS, ...)
        if col in seen:
            raise ValueError(f"{col} given twice in one batch line")
        seen.add(col)
        row[col] = _batch_value(col, text)
    missing = [c for c in BATCH_REQUIRED[kind] if row[c] is None]
    if missing:
        raise ValueError(f"a {kind} batch line without {', '.join(missing)}")
    return {k: base[k] for k in ("node", "file_id", "line", "ts")} | {"kind": kind} | row

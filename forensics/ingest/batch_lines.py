"""Ingest stage, SGLang's periodic batch lines (`Decode batch ...`, `Prefill batch ...`): one typed
batch_stats row per line, NULL where the line's release does not print a field (the field names of each
release: forensics.engines.sglang BATCH_FIELDS). A line whose fields cannot be read raises ValueError:
the caller rejects it with its file and line.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from forensics.engines.sglang import BATCH_FIELDS, BATCH_FLOATS, BATCH_REQUIRED

COLUMNS = (
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
SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("kind", pa.string()),
        *[(c, pa.float64() if c in BATCH_FLOATS else pa.int64()) for c in COLUMNS],
        ("graph", pa.bool_()),
    ]
)
_INT = re.compile(r"\d+")
_FLOAT = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|nan|inf")
_FULL = re.compile(r"full=(?P<v>[^,]+)")  # 0.4.9's hybrid pool: `#token: full=N, swa=M`
INT64_MAX = (1 << 63) - 1


def _fields(body: str) -> list[tuple[str, str]]:
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


def _value(col: str, text: str) -> int | float:
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


def batch_row(m: re.Match[str], base: dict[str, Any]) -> dict[str, Any]:
    """A batch_stats row from a BATCH_LINE match; ValueError when a field it reads is not a number, is
    given twice, or a field every release prints is missing."""
    kind = m["kind"].lower()
    names = BATCH_FIELDS[kind]
    row: dict[str, Any] = dict.fromkeys(COLUMNS) | {"graph": None}
    row["forward_ct"] = _value("forward_ct", m["iter"]) if m["iter"] else None
    seen: set[str] = set()
    for name, text in _fields(m["body"]):
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
        row[col] = _value(col, text)
    missing = [c for c in BATCH_REQUIRED[kind] if row[c] is None]
    if missing:
        raise ValueError(f"a {kind} batch line without {', '.join(missing)}")
    return {k: base[k] for k in ("node", "file_id", "line", "ts")} | {"kind": kind} | row

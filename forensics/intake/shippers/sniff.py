"""Which shipper wrote a file, from its first bytes (its fields, or its lines' shape), and whether a JSON
file is one document (an API answer) or one record per line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from forensics.intake.shippers.fields import CRI, CW_COPY, CW_EVENTS, KUBECTL, sniff_head


def _first_lines(head: bytes, n: int = 5) -> list[str]:
    text = head.decode("utf-8", errors="replace")
    lines = [ln for ln in text.split("\n")[:-1] if ln.strip()] or ([text] if text.strip() else [])
    return lines[:n]


def _json_kind(obj: Any) -> str | None:
    """The format of one JSON value, from its own fields."""
    if isinstance(obj, list):
        return "loki" if obj and isinstance(obj[0], dict) and {"stream", "values"} <= obj[0].keys() else None
    if not isinstance(obj, dict):
        return None
    keys = obj.keys()
    if {"log", "stream", "time"} <= keys:
        return "docker_json"
    if (
        "events" in keys
        and isinstance(obj["events"], list)
        and (not obj["events"] or isinstance(obj["events"][0], dict) and "message" in obj["events"][0])
    ):
        return "cloudwatch_json"
    data = obj.get("data")
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        return "loki"
    if {"labels", "line"} <= keys:
        return "loki"
    if isinstance(data, list) and (not data or isinstance(data[0], dict) and "attributes" in data[0]):
        return "datadog"
    if obj.get("type") == "log" and isinstance(obj.get("attributes"), dict):
        return "datadog"
    if isinstance(obj.get("hits"), dict) and isinstance(obj["hits"].get("hits"), list):
        return "elasticsearch"
    if "_source" in keys and ("_index" in keys or "_id" in keys):
        return "elasticsearch"
    if "MESSAGE" in keys and "__REALTIME_TIMESTAMP" in keys:
        return "journald"
    return None


def recognise(path: Path) -> str | None:
    """The shipper format of a file, from its first bytes; None for a plain engine log (or not a shipper's)."""
    head = sniff_head(path)
    if not head.strip():
        return None
    first = head.lstrip()[:1]
    if first in (b"{", b"["):
        # a whole JSON document (fits the sniff) or JSON lines
        try:
            kind = _json_kind(json.loads(head))
            if kind:
                return kind
        except ValueError:
            pass
        lines = _first_lines(head, 3)
        try:
            kinds = {_json_kind(json.loads(ln)) for ln in lines}
        except ValueError:
            kinds = set()
        if len(kinds) == 1 and None not in kinds:
            return kinds.pop()
        # a document larger than the sniff: its opening names its fields
        text = head[:4096].decode("utf-8", errors="replace")
        if re.match(r'\s*\{\s*"events"\s*:', text):
            return "cloudwatch_json"
        if '"resultType"' in text and '"streams"' in text:
            return "loki"
        if re.match(r'\s*\{\s*"data"\s*:\s*\[', text) and '"attributes"' in text:
            return "datadog"
        if '"hits"' in text and '"_source"' in text:
            return "elasticsearch"
        return None
    lines = _first_lines(head)
    if not lines:
        return None
    if all(CW_EVENTS.match(ln) for ln in lines):
        return "cloudwatch_text"
    if all(CW_COPY.match(ln) for ln in lines):
        return "cloudwatch_text"
    header = lines[0]
    if "@message" in header and "@timestamp" in header:
        return "cloudwatch_csv"
    if all(CRI.match(ln) for ln in lines):
        return "cri"
    if all(KUBECTL.match(ln) for ln in lines):
        return "kubectl"
    return None


def is_document(path: Path) -> bool:
    """True when the file is one JSON value (an API answer), not one record per line: its first line is not
    a whole JSON value (a pretty-printed document), or is an envelope (events, data, hits, a list)."""
    head = sniff_head(path).lstrip()
    first = head.split(b"\n", 1)[0]
    try:
        value = json.loads(first)
    except ValueError:
        return True
    return (
        isinstance(value, list) or isinstance(value, dict) and bool({"events", "data", "hits", "status"} & value.keys())
    )

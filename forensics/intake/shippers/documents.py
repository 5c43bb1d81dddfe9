"""The shippers whose files are JSON API answers, whole or a record per line: CloudWatch's events, Loki's
streams, Datadog's and Elasticsearch's events, journald's entries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from forensics.intake.shippers.fields import (
    Record,
    clean_labels,
    epoch,
    fluent,
    labels_of,
    open_log,
    time_of,
    with_stream,
)
from forensics.intake.shippers.lines import json_records


def cloudwatch_json(doc: Any, base: dict[str, str]) -> Iterator[Record]:
    for i, ev in enumerate(doc.get("events") or [], start=1):
        if not isinstance(ev, dict):
            continue
        labels = dict(base)
        if ev.get("logStreamName"):
            labels["stream_name"] = str(ev["logStreamName"])
        message, labels, _ = fluent(str(ev.get("message", "")), labels)
        yield i, message, epoch(ev.get("timestamp"), 1000), with_stream(labels)


def loki_streams(streams: Any, base: dict[str, str]) -> Iterator[Record]:
    i = 0
    for s in streams or []:
        if not isinstance(s, dict):
            continue
        labels = base | labels_of(s.get("stream") or {})
        for v in s.get("values") or []:
            i += 1
            if isinstance(v, list) and len(v) >= 2:
                yield i, str(v[1]), epoch(v[0], 10**9), labels


def _tags(tags: Any) -> dict[str, str]:
    """Datadog's "key:value" tags as a dict (the first value of each key)."""
    out: dict[str, str] = {}
    for t in tags if isinstance(tags, list) else []:
        if isinstance(t, str) and ":" in t:
            k, v = t.split(":", 1)
            out.setdefault(k, v)
    return out


def _datadog_event(ev: Any) -> tuple[str, datetime | None, dict[str, str]] | None:
    if not isinstance(ev, dict):
        return None
    a: dict[str, Any] = ev["attributes"] if isinstance(ev.get("attributes"), dict) else ev
    labels = labels_of(_tags(a.get("tags")) | {k: a[k] for k in ("host",) if a.get("host")})
    return str(a.get("message", "")), time_of(a.get("timestamp")), labels


def _es_hit(hit: Any) -> tuple[str, datetime | None, dict[str, str]] | None:
    if not isinstance(hit, dict):
        return None
    src: dict[str, Any] = hit["_source"] if isinstance(hit.get("_source"), dict) else hit
    k8s: dict[str, Any] = src["kubernetes"] if isinstance(src.get("kubernetes"), dict) else {}

    def name(obj: Any) -> Any:
        return obj.get("name") if isinstance(obj, dict) else obj

    labels = clean_labels(
        {
            "pod": name(k8s.get("pod")) or k8s.get("pod_name"),
            "container": name(k8s.get("container")) or k8s.get("container_name") or name(src.get("container")),
            "namespace": k8s.get("namespace") if isinstance(k8s.get("namespace"), str) else k8s.get("namespace_name"),
            "host": name(src.get("host")) or k8s.get("host"),
            "stream": src.get("stream"),
        }
    )
    message = src.get("message")
    if message is None and isinstance(src.get("log"), str):
        message = src["log"]  # Fluentd's elasticsearch output keeps the record's "log"
    return str(message or ""), time_of(src.get("@timestamp")), labels


def _journald(rec: dict[str, Any]) -> tuple[str, datetime | None, dict[str, str]]:
    msg = rec.get("MESSAGE")
    if isinstance(msg, list):  # not UTF-8: an array of byte values
        msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode("utf-8", errors="replace")
    labels = labels_of({k: rec[k] for k in ("_HOSTNAME", "CONTAINER_NAME") if isinstance(rec.get(k), str)})
    if "CONTAINER_NAME" not in rec and isinstance(rec.get("SYSLOG_IDENTIFIER"), str):
        labels["container"] = rec["SYSLOG_IDENTIFIER"]
    return str(msg or ""), epoch(rec.get("__REALTIME_TIMESTAMP"), 10**6), labels


def json_lines(path: Path, fmt: str, base: dict[str, str]) -> Iterator[Record]:
    """One record per line: journald, logcli jsonl, Datadog or Elasticsearch events written a line each."""
    for n, text, rec in json_records(path):
        if rec is None:
            yield n, text, None, base
            continue
        if fmt == "journald":
            msg, when, labels = _journald(rec)
        elif fmt == "loki":
            msg, when, labels = (
                str(rec.get("line", "")),
                time_of(rec.get("timestamp")),
                labels_of(rec.get("labels") or {}),
            )
        elif fmt == "datadog" and (got := _datadog_event(rec)):
            msg, when, labels = got
        elif fmt == "elasticsearch" and (got := _es_hit(rec)):
            msg, when, labels = got
        else:
            yield n, text, None, base
            continue
        yield n, msg, when, base | labels


def document(path: Path, fmt: str, base: dict[str, str]) -> Iterator[Record]:
    with open_log(path) as fh:
        doc = json.load(fh)
    if fmt == "cloudwatch_json":
        yield from cloudwatch_json(doc, base)
    elif fmt == "loki":
        yield from loki_streams(doc if isinstance(doc, list) else (doc.get("data") or {}).get("result"), base)
    elif fmt == "datadog":
        for i, ev in enumerate(doc.get("data") or [], start=1):
            if got := _datadog_event(ev):
                yield i, got[0], got[1], base | got[2]
    elif fmt == "elasticsearch":
        for i, hit in enumerate((doc.get("hits") or {}).get("hits") or [], start=1):
            if got := _es_hit(hit):
                yield i, got[0], got[1], base | got[2]

"""The shippers whose files are lines: Docker's json-file, CRI, kubectl --timestamps, CloudWatch's text
and CSV exports; each joins the records its shipper split and passes a line not of its format on as it is."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forensics.intake.shippers.fields import (
    CRI,
    CW_COPY,
    KUBECTL,
    Record,
    clean_labels,
    epoch,
    fluent,
    open_log,
    time_of,
    utc_rfc3339,
    with_stream,
)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with open_log(path) as fh:
        for n, raw in enumerate(fh, start=1):
            yield n, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def json_records(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
    """The non-blank lines of a file of one JSON object per line: (line number, text, the object, or
    None where the line is not one: the caller passes such a line on as it is, and the reader rejects
    it if it must)."""
    for n, text in _lines(path):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except ValueError:
            rec = None
        yield n, text, rec if isinstance(rec, dict) else None


def docker(path: Path, base: dict[str, str]) -> Iterator[Record]:
    pending: list[str] = []
    start = 0
    for n, text, rec in json_records(path):
        if rec is None:  # not the driver's: the line as it is
            yield n, text, None, base
            continue
        log = str(rec.get("log", ""))
        if not pending:
            start = n
        pending.append(log)
        if log.endswith("\n"):  # a partial record (16 KiB buffer) has none: joined with the next
            labels = base | clean_labels({"stream": rec.get("stream")})
            yield start, "".join(pending), time_of(rec.get("time")), labels
            pending = []
    if pending:
        yield start, "".join(pending), None, base


def cri(path: Path, base: dict[str, str]) -> Iterator[Record]:
    pending: list[str] = []
    start = 0
    for n, text in _lines(path):
        m = CRI.match(text)
        if not m:
            if text.strip():
                yield n, text, None, base
            continue
        if not pending:
            start = n
        pending.append(m["line"])
        if m["tag"] == "F":
            yield start, "".join(pending), utc_rfc3339(m["ts"]), base | {"stream": m["stream"]}
            pending = []
    if pending:
        yield start, "".join(pending), None, base


def kubectl(path: Path, base: dict[str, str]) -> Iterator[Record]:
    for n, text in _lines(path):
        m = KUBECTL.match(text)
        if m:
            yield n, m["line"], utc_rfc3339(m["ts"]), base
        elif text.strip():  # a line kubectl printed without a time (a traceback the engine wrote in one write)
            yield n, text, None, base


def cloudwatch_text(path: Path, base: dict[str, str]) -> Iterator[Record]:
    for n, text in _lines(path):
        if m := CW_COPY.match(text):
            yield n, m["line"], epoch(m["ms"], 1000), base
            continue
        cols = text.split("\t")
        if cols[0] != "EVENTS" or len(cols) < 4:
            if text.strip():
                yield n, text, None, base
            continue
        labels = dict(base)
        if (
            len(cols) >= 6 and len(cols[1]) > 20
        ):  # filter-log-events: eventId, ingestionTime, logStreamName, message, timestamp
            labels["stream_name"] = cols[3]
            message = "\t".join(cols[4:-1])
        else:  # get-log-events: ingestionTime, message, timestamp
            message = "\t".join(cols[2:-1])
        message, labels, _ = fluent(message, labels)
        yield n, message, epoch(cols[-1], 1000), with_stream(labels)


def cloudwatch_csv(path: Path, base: dict[str, str]) -> Iterator[Record]:
    with open_log(path) as fh:
        reader = csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=""))
        for i, row in enumerate(reader, start=1):
            labels = dict(base)
            if row.get("@logStream"):
                labels["stream_name"] = row["@logStream"]
            message, labels, _ = fluent(row.get("@message") or "", labels)
            ts = row.get("@timestamp") or ""
            # Insights writes "2026-05-20 08:02:44.565" (UTC) or epoch ms
            when = (
                time_of(ts)
                if ts.strip().isdigit()
                else utc_rfc3339(ts.replace(" ", "T") + ("" if ts.endswith("Z") else "Z"))
            )
            yield i, message, when, with_stream(labels)

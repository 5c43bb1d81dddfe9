"""Log-shipper wrappers around engine logs: recognise a file's wrapper from its own fields or line shape,
and yield the engine's lines inside it, each with where it was in the file, the shipper's time and the
shipper's labels (pod, container, host, stream).

Nobody hands an investigator the raw server.log: it comes out of the log pipeline. Each format below is
read as its owner documents it:

- `docker_json`: Docker's json-file driver, one JSON object per line `{"log": "...\\n", "stream":
  "stdout", "time": "<RFC 3339 nano>"}` (https://docs.docker.com/engine/logging/drivers/json-file/). A
  line longer than the driver's 16 KiB buffer is written as several records, only the last ending in
  "\\n": they are joined again (moby daemon/logger/jsonfilelog, partial messages).
- `cri`: the kubelet's container log files (/var/log/pods/<namespace>_<pod>_<uid>/<container>/N.log,
  /var/log/containers/<pod>_<namespace>_<container>-<id>.log): `<RFC 3339 nano> <stream> <P|F> <line>`,
  P a partial line continued by the next record (kubernetes CRI design, kubelet/kuberuntime logs).
- `kubectl`: `kubectl logs --timestamps` (https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/:
  "Include timestamps on each line in the log output"): `<RFC 3339 nano> <line>`. A file named
  `<namespace>_<pod>_<container>.log` (how collection scripts name a folder of such dumps) gives its labels.
- `cloudwatch_json`: `aws logs get-log-events` / `filter-log-events` JSON output, `{"events": [{"timestamp":
  <ms>, "message": "...", "ingestionTime": <ms>[, "logStreamName": "..."]}], "nextForwardToken": ...}`
  (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_OutputLogEvent.html). A message
  that is itself a Fluent Bit record (`{"log": ..., "kubernetes": {"pod_name", "container_name", "host"}}`,
  Container Insights) is unwrapped once more.
- `cloudwatch_text`: the same with `--output text`: `EVENTS<TAB>ingestionTime<TAB>message<TAB>timestamp`
  (get-log-events, keys in order) or `EVENTS<TAB>eventId<TAB>ingestionTime<TAB>logStreamName<TAB>message<TAB>
  timestamp` (filter-log-events); and the console's copy `<epoch ms><TAB><ISO time><TAB><line>` as pasted in
  sgl-project/sglang#25887.
- `cloudwatch_csv`: a Logs Insights result downloaded as CSV from the console, columns `@timestamp`,
  `@message` (and `@logStream`, `@log`) (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_QuerySyntax.html).
- `loki`: Loki's query_range answer as Grafana exports it, `{"data": {"resultType": "streams", "result":
  [{"stream": {labels}, "values": [["<ns epoch>", "<line>"], ...]}]}}`
  (https://grafana.com/docs/loki/latest/reference/loki-http-api/#query-logs-within-a-range-of-time), a bare
  list of such streams, or `logcli --output=jsonl` lines `{"labels": {...}, "line": "...", "timestamp": "..."}`.
- `datadog`: Logs Search API v2 (GET/POST /api/v2/logs/events), `{"data": [{"id", "type": "log",
  "attributes": {"message", "timestamp", "host", "service", "tags": ["pod_name:..", ...]}}]}`
  (https://docs.datadoghq.com/api/latest/logs/), or one such event per line.
- `elasticsearch`: `_search` hits of Elasticsearch / OpenSearch, `{"hits": {"hits": [{"_index", "_id",
  "_source": {"@timestamp", "message", "host": {"name"}, "kubernetes": {"pod": {"name"}, "container":
  {"name"}}}}]}}` (https://www.elastic.co/guide/en/elasticsearch/reference/current/search-search.html; ECS
  fields https://www.elastic.co/guide/en/ecs/current/ecs-field-reference.html), or one hit per line.
- `journald`: `journalctl -o json`, one entry per line, `__REALTIME_TIMESTAMP` (microseconds, as a string),
  `MESSAGE` (a string, or an array of bytes when not UTF-8), `_HOSTNAME`, `CONTAINER_NAME`, `SYSLOG_IDENTIFIER`
  (https://systemd.io/JOURNAL_EXPORT_FORMATS/#journal-json-format).

A record that holds several lines (a multi-line event: a traceback shipped as one) yields each of them;
records the shipper split (Docker partials, CRI `P`) are joined first. `line` numbers the engine lines in
the order unwrapped (1-based; the SGLang readers keep it as the evidence's line); `record` is where the
shipper's record is in the file (its physical line for line formats, its position for JSON documents).

The package: `sniff` names a file's format, `lines` reads the formats of lines, `documents` the JSON
answers, `fields` holds what they share (times, labels, the line patterns); this module dispatches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from forensics.intake.shippers import documents, lines
from forensics.intake.shippers.fields import LABELS, Record, from_name
from forensics.intake.shippers.sniff import is_document, recognise

__all__ = ["FORMATS", "LABELS", "Shipped", "node_of", "recognise", "records", "unwrap"]

FORMATS = (
    "docker_json",
    "cri",
    "kubectl",
    "cloudwatch_json",
    "cloudwatch_text",
    "cloudwatch_csv",
    "loki",
    "datadog",
    "elasticsearch",
    "journald",
)


@dataclass
class Shipped:
    """One engine line out of a shipper's record."""

    line: int  # the engine line's number in the unwrapped stream (1-based)
    record: int  # the shipper record it came from (physical line, or position in a JSON document)
    raw: bytes  # the engine's line, without its newline
    shipped_at: datetime | None  # the shipper's time of the record (UTC)
    labels: dict[str, str] = field(default_factory=dict)


def _split(text: str) -> list[str]:
    """The lines of one record's text (a trailing newline ends the last one, it adds none)."""
    if text.endswith("\n"):
        text = text[:-1]
    return text.replace("\r\n", "\n").split("\n")


def records(path: Path, fmt: str) -> Iterator[Record]:
    """The shipper's records of a file in format `fmt`, as (record number, text, shipper time, labels)."""
    base = from_name(path)
    if fmt == "docker_json":
        yield from lines.docker(path, base)
    elif fmt == "cri":
        yield from lines.cri(path, base)
    elif fmt == "kubectl":
        yield from lines.kubectl(path, base)
    elif fmt == "cloudwatch_text":
        yield from lines.cloudwatch_text(path, base)
    elif fmt == "cloudwatch_csv":
        yield from lines.cloudwatch_csv(path, base)
    elif fmt == "journald":
        yield from documents.json_lines(path, fmt, base)
    elif fmt in ("cloudwatch_json", "loki", "datadog", "elasticsearch"):
        yield from (documents.document(path, fmt, base) if is_document(path) else documents.json_lines(path, fmt, base))
    else:
        raise ValueError(f"unknown shipper format {fmt!r}")


def unwrap(path: Path, fmt: str) -> Iterator[Shipped]:
    """The engine lines inside a shipper's file, numbered in order, each with its record, time and labels."""
    n = 0
    for record, text, when, labels in records(path, fmt):
        for piece in _split(text):
            n += 1
            yield Shipped(n, record, piece.encode("utf-8", errors="replace"), when, labels)


def node_of(labels: dict[str, str], order: tuple[str, ...], names: dict[str, str]) -> str | None:
    """The node a line's labels name: the first of `order` (labels) present, renamed by `names` (bundle.toml
    [shipper] nodes, label value -> node) when it lists it."""
    for label in order:
        value = labels.get(label)
        if value:
            return names.get(value, value)
    return None

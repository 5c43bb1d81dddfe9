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
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

SNIFF_BYTES = 1 << 16
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
_KUBECTL = re.compile(rf"^(?P<ts>{_RFC3339}) (?P<line>.*)$", re.S)
_CRI = re.compile(rf"^(?P<ts>{_RFC3339}) (?P<stream>stdout|stderr) (?P<tag>[PF])(?::\S*)? ?(?P<line>.*)$", re.S)
_CW_COPY = re.compile(rf"^(?P<ms>\d{{13}})\t(?P<iso>{_RFC3339})\t(?P<line>.*)$", re.S)
_CW_EVENTS = re.compile(r"^EVENTS\t")
# <namespace>_<pod>_<container>.log (kubectl dumps); <pod>_<namespace>_<container>-<64 hex>.log (/var/log/containers)
_VAR_LOG_CONTAINERS = re.compile(r"^(?P<pod>[^_]+)_(?P<namespace>[^_]+)_(?P<container>.+)-[0-9a-f]{64}\.log$")
_NS_POD_CONTAINER = re.compile(r"^(?P<namespace>[^_]+)_(?P<pod>[^_]+)_(?P<container>[^_]+?)(?:\.log|\.txt)?$")

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
LABELS = ("pod", "container", "host", "namespace", "stream")


@dataclass
class Shipped:
    """One engine line out of a shipper's record."""

    line: int  # the engine line's number in the unwrapped stream (1-based)
    record: int  # the shipper record it came from (physical line, or position in a JSON document)
    raw: bytes  # the engine's line, without its newline
    shipped_at: datetime | None  # the shipper's time of the record (UTC)
    labels: dict[str, str] = field(default_factory=dict)


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else path.open("rb")  # type: ignore[return-value]


def _head(path: Path) -> bytes:
    try:
        with _open(path) as fh:
            return fh.read(SNIFF_BYTES)
    except (OSError, EOFError):
        return b""


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
    head = _head(path)
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
    if all(_CW_EVENTS.match(ln) for ln in lines):
        return "cloudwatch_text"
    if all(_CW_COPY.match(ln) for ln in lines):
        return "cloudwatch_text"
    header = lines[0]
    if "@message" in header and "@timestamp" in header:
        return "cloudwatch_csv"
    if all(_CRI.match(ln) for ln in lines):
        return "cri"
    if all(_KUBECTL.match(ln) for ln in lines):
        return "kubectl"
    return None


def _utc_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 time (nanoseconds cut to microseconds) in UTC; None when it does not parse."""
    m = re.match(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$", text.strip())
    if not m:
        return None
    frac = (m[2] or "")[:6].ljust(6, "0")
    zone = m[3] or "Z"
    try:
        dt = datetime.fromisoformat(f"{m[1].replace(' ', 'T')}.{frac}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:
        return None
    return dt.astimezone(UTC)


def _epoch(value: Any, per_second: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value) / per_second, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _when(value: Any) -> datetime | None:
    """A shipper time written as RFC 3339 text or as epoch s/ms/us/ns (told apart by size)."""
    if isinstance(value, int | float) or isinstance(value, str) and value.strip().isdigit():
        n = int(value)
        scale = 1 if n < 10**11 else 1000 if n < 10**14 else 10**6 if n < 10**17 else 10**9
        return _epoch(n, scale)
    return _utc_rfc3339(str(value)) if value is not None else None


def _clean_labels(d: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in d.items() if k in LABELS and v not in (None, "")}


def _from_name(path: Path) -> dict[str, str]:
    """Labels a kubelet or kubectl file name gives (/var/log/containers, /var/log/pods, ns_pod_container)."""
    name = path.name
    if name.lower().endswith(".gz"):
        name = name[:-3]
    if m := _VAR_LOG_CONTAINERS.match(name):
        return m.groupdict()
    parent = path.parent.name  # /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log
    if re.fullmatch(r"\d+\.log", name) and (m := re.match(r"^([^_]+)_([^_]+)_[0-9a-f-]{36}$", path.parent.parent.name)):
        return {"namespace": m[1], "pod": m[2], "container": parent}
    if m := _NS_POD_CONTAINER.match(name):
        return m.groupdict()
    return {}


def _fluent(message: str, labels: dict[str, str]) -> tuple[str, dict[str, str], datetime | None]:
    """A message that is a Fluent Bit / Fluentd record with the Kubernetes filter's metadata: its log and labels."""
    if not message.startswith("{") or '"log"' not in message:
        return message, labels, None
    try:
        rec = json.loads(message)
    except ValueError:
        return message, labels, None
    if not isinstance(rec, dict) or not isinstance(rec.get("log"), str):
        return message, labels, None
    k8s: dict[str, Any] = rec["kubernetes"] if isinstance(rec.get("kubernetes"), dict) else {}
    more = {
        "pod": k8s.get("pod_name"),
        "container": k8s.get("container_name"),
        "namespace": k8s.get("namespace_name"),
        "host": k8s.get("host"),
        "stream": rec.get("stream"),
    }
    return rec["log"], labels | _clean_labels(more), _when(rec.get("time")) if rec.get("time") else None


def _split(text: str) -> list[str]:
    """The lines of one record's text (a trailing newline ends the last one, it adds none)."""
    if text.endswith("\n"):
        text = text[:-1]
    return text.replace("\r\n", "\n").split("\n")


# --- each format as (record number, text, shipper time, labels) records ---

Record = tuple[int, str, datetime | None, dict[str, str]]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open(path) as fh:
        for n, raw in enumerate(fh, start=1):
            yield n, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _json_records(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
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


def _docker(path: Path, base: dict[str, str]) -> Iterator[Record]:
    pending: list[str] = []
    start = 0
    for n, text, rec in _json_records(path):
        if rec is None:  # not the driver's: the line as it is
            yield n, text, None, base
            continue
        log = str(rec.get("log", ""))
        if not pending:
            start = n
        pending.append(log)
        if log.endswith("\n"):  # a partial record (16 KiB buffer) has none: joined with the next
            labels = base | _clean_labels({"stream": rec.get("stream")})
            yield start, "".join(pending), _when(rec.get("time")), labels
            pending = []
    if pending:
        yield start, "".join(pending), None, base


def _cri(path: Path, base: dict[str, str]) -> Iterator[Record]:
    pending: list[str] = []
    start = 0
    for n, text in _lines(path):
        m = _CRI.match(text)
        if not m:
            if text.strip():
                yield n, text, None, base
            continue
        if not pending:
            start = n
        pending.append(m["line"])
        if m["tag"] == "F":
            yield start, "".join(pending), _utc_rfc3339(m["ts"]), base | {"stream": m["stream"]}
            pending = []
    if pending:
        yield start, "".join(pending), None, base


def _kubectl(path: Path, base: dict[str, str]) -> Iterator[Record]:
    for n, text in _lines(path):
        m = _KUBECTL.match(text)
        if m:
            yield n, m["line"], _utc_rfc3339(m["ts"]), base
        elif text.strip():  # a line kubectl printed without a time (a traceback the engine wrote in one write)
            yield n, text, None, base


def _cloudwatch_text(path: Path, base: dict[str, str]) -> Iterator[Record]:
    for n, text in _lines(path):
        if m := _CW_COPY.match(text):
            yield n, m["line"], _epoch(m["ms"], 1000), base
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
        message, labels, _ = _fluent(message, labels)
        yield n, message, _epoch(cols[-1], 1000), _with_stream(labels)


def _with_stream(labels: dict[str, str]) -> dict[str, str]:
    """A CloudWatch log stream named after the kubelet's file (Container Insights: <host>-application.var.log.
    containers.<pod>_<namespace>_<container>-<id>.log) names the pod; the name itself stays out of the labels."""
    name = labels.pop("stream_name", None)
    if name and "pod" not in labels and (m := re.search(r"containers\.(.+\.log)$", name)):
        return labels | _from_name(Path(m[1]))
    return labels


def _cloudwatch_json(doc: Any, base: dict[str, str]) -> Iterator[Record]:
    for i, ev in enumerate(doc.get("events") or [], start=1):
        if not isinstance(ev, dict):
            continue
        labels = dict(base)
        if ev.get("logStreamName"):
            labels["stream_name"] = str(ev["logStreamName"])
        message, labels, _ = _fluent(str(ev.get("message", "")), labels)
        yield i, message, _epoch(ev.get("timestamp"), 1000), _with_stream(labels)


def _cloudwatch_csv(path: Path, base: dict[str, str]) -> Iterator[Record]:
    with _open(path) as fh:
        reader = csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=""))
        for i, row in enumerate(reader, start=1):
            labels = dict(base)
            if row.get("@logStream"):
                labels["stream_name"] = row["@logStream"]
            message, labels, _ = _fluent(row.get("@message") or "", labels)
            ts = row.get("@timestamp") or ""
            # Insights writes "2026-05-20 08:02:44.565" (UTC) or epoch ms
            when = (
                _when(ts)
                if ts.strip().isdigit()
                else _utc_rfc3339(ts.replace(" ", "T") + ("" if ts.endswith("Z") else "Z"))
            )
            yield i, message, when, _with_stream(labels)


def _loki_streams(streams: Any, base: dict[str, str]) -> Iterator[Record]:
    i = 0
    for s in streams or []:
        if not isinstance(s, dict):
            continue
        labels = base | _labels_of(s.get("stream") or {})
        for v in s.get("values") or []:
            i += 1
            if isinstance(v, list) and len(v) >= 2:
                yield i, str(v[1]), _epoch(v[0], 10**9), labels


def _labels_of(d: dict[str, Any]) -> dict[str, str]:
    """The pod, container, host and namespace among a shipper's labels, under their common names."""
    names = {
        "pod": ("pod", "pod_name", "kubernetes_pod_name", "k8s_pod_name", "kubernetes.pod_name", "kube_pod_name"),
        "container": ("container", "container_name", "kubernetes_container_name", "kube_container_name",
                      "k8s_container_name", "CONTAINER_NAME"),
        "host": ("host", "hostname", "node_name", "kubernetes_host", "_HOSTNAME", "instance"),
        "namespace": ("namespace", "namespace_name", "kubernetes_namespace_name", "kube_namespace",
                      "k8s_namespace_name"),
        "stream": ("stream",),
    }  # fmt: skip
    out: dict[str, str] = {}
    for label, keys in names.items():
        for k in keys:
            if isinstance(d.get(k), str | int) and str(d[k]):
                out[label] = str(d[k])
                break
    return out


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
    labels = _labels_of(_tags(a.get("tags")) | {k: a[k] for k in ("host",) if a.get("host")})
    return str(a.get("message", "")), _when(a.get("timestamp")), labels


def _es_hit(hit: Any) -> tuple[str, datetime | None, dict[str, str]] | None:
    if not isinstance(hit, dict):
        return None
    src: dict[str, Any] = hit["_source"] if isinstance(hit.get("_source"), dict) else hit
    k8s: dict[str, Any] = src["kubernetes"] if isinstance(src.get("kubernetes"), dict) else {}

    def name(obj: Any) -> Any:
        return obj.get("name") if isinstance(obj, dict) else obj

    labels = _clean_labels(
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
    return str(message or ""), _when(src.get("@timestamp")), labels


def _journald(rec: dict[str, Any]) -> tuple[str, datetime | None, dict[str, str]]:
    msg = rec.get("MESSAGE")
    if isinstance(msg, list):  # not UTF-8: an array of byte values
        msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode("utf-8", errors="replace")
    labels = _labels_of({k: rec[k] for k in ("_HOSTNAME", "CONTAINER_NAME") if isinstance(rec.get(k), str)})
    if "CONTAINER_NAME" not in rec and isinstance(rec.get("SYSLOG_IDENTIFIER"), str):
        labels["container"] = rec["SYSLOG_IDENTIFIER"]
    return str(msg or ""), _epoch(rec.get("__REALTIME_TIMESTAMP"), 10**6), labels


def _json_lines(path: Path, fmt: str, base: dict[str, str]) -> Iterator[Record]:
    """One record per line: journald, logcli jsonl, Datadog or Elasticsearch events written a line each."""
    for n, text, rec in _json_records(path):
        if rec is None:
            yield n, text, None, base
            continue
        if fmt == "journald":
            msg, when, labels = _journald(rec)
        elif fmt == "loki":
            msg, when, labels = (
                str(rec.get("line", "")),
                _when(rec.get("timestamp")),
                _labels_of(rec.get("labels") or {}),
            )
        elif fmt == "datadog" and (got := _datadog_event(rec)):
            msg, when, labels = got
        elif fmt == "elasticsearch" and (got := _es_hit(rec)):
            msg, when, labels = got
        else:
            yield n, text, None, base
            continue
        yield n, msg, when, base | labels


def _document(path: Path, fmt: str, base: dict[str, str]) -> Iterator[Record]:
    with _open(path) as fh:
        doc = json.load(fh)
    if fmt == "cloudwatch_json":
        yield from _cloudwatch_json(doc, base)
    elif fmt == "loki":
        yield from _loki_streams(doc if isinstance(doc, list) else (doc.get("data") or {}).get("result"), base)
    elif fmt == "datadog":
        for i, ev in enumerate(doc.get("data") or [], start=1):
            if got := _datadog_event(ev):
                yield i, got[0], got[1], base | got[2]
    elif fmt == "elasticsearch":
        for i, hit in enumerate((doc.get("hits") or {}).get("hits") or [], start=1):
            if got := _es_hit(hit):
                yield i, got[0], got[1], base | got[2]


def _is_document(path: Path) -> bool:
    """True when the file is one JSON value (an API answer), not one record per line: its first line is not
    a whole JSON value (a pretty-printed document), or is an envelope (events, data, hits, a list)."""
    head = _head(path).lstrip()
    first = head.split(b"\n", 1)[0]
    try:
        value = json.loads(first)
    except ValueError:
        return True
    return (
        isinstance(value, list) or isinstance(value, dict) and bool({"events", "data", "hits", "status"} & value.keys())
    )


def records(path: Path, fmt: str) -> Iterator[Record]:
    """The shipper's records of a file in format `fmt`, as (record number, text, shipper time, labels)."""
    base = _from_name(path)
    if fmt == "docker_json":
        yield from _docker(path, base)
    elif fmt == "cri":
        yield from _cri(path, base)
    elif fmt == "kubectl":
        yield from _kubectl(path, base)
    elif fmt == "cloudwatch_text":
        yield from _cloudwatch_text(path, base)
    elif fmt == "cloudwatch_csv":
        yield from _cloudwatch_csv(path, base)
    elif fmt == "journald":
        yield from _json_lines(path, fmt, base)
    elif fmt in ("cloudwatch_json", "loki", "datadog", "elasticsearch"):
        yield from (_document(path, fmt, base) if _is_document(path) else _json_lines(path, fmt, base))
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

"""What the shippers' formats share: the file opened (gzip or plain), the shipper's time in any of its
spellings, the labels (pod, container, host, namespace, stream) under their common names, and the line
patterns both the sniff and the line readers test."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

SNIFF_BYTES = 1 << 16
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
KUBECTL = re.compile(rf"^(?P<ts>{_RFC3339}) (?P<line>.*)$", re.S)
CRI = re.compile(rf"^(?P<ts>{_RFC3339}) (?P<stream>stdout|stderr) (?P<tag>[PF])(?::\S*)? ?(?P<line>.*)$", re.S)
CW_COPY = re.compile(rf"^(?P<ms>\d{{13}})\t(?P<iso>{_RFC3339})\t(?P<line>.*)$", re.S)
CW_EVENTS = re.compile(r"^EVENTS\t")
# <namespace>_<pod>_<container>.log (kubectl dumps); <pod>_<namespace>_<container>-<64 hex>.log (/var/log/containers)
_VAR_LOG_CONTAINERS = re.compile(r"^(?P<pod>[^_]+)_(?P<namespace>[^_]+)_(?P<container>.+)-[0-9a-f]{64}\.log$")
_NS_POD_CONTAINER = re.compile(r"^(?P<namespace>[^_]+)_(?P<pod>[^_]+)_(?P<container>[^_]+?)(?:\.log|\.txt)?$")

LABELS = ("pod", "container", "host", "namespace", "stream")

# one shipper record: (record number, text, shipper time, labels)
Record = tuple[int, str, datetime | None, dict[str, str]]


def open_log(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else path.open("rb")  # type: ignore[return-value]


def sniff_head(path: Path) -> bytes:
    try:
        with open_log(path) as fh:
            return fh.read(SNIFF_BYTES)
    except (OSError, EOFError):
        return b""


def utc_rfc3339(text: str) -> datetime | None:
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


def epoch(value: Any, per_second: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value) / per_second, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def time_of(value: Any) -> datetime | None:
    """A shipper time written as RFC 3339 text or as epoch s/ms/us/ns (told apart by size)."""
    if isinstance(value, int | float) or isinstance(value, str) and value.strip().isdigit():
        n = int(value)
        scale = 1 if n < 10**11 else 1000 if n < 10**14 else 10**6 if n < 10**17 else 10**9
        return epoch(n, scale)
    return utc_rfc3339(str(value)) if value is not None else None


def clean_labels(d: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in d.items() if k in LABELS and v not in (None, "")}


def from_name(path: Path) -> dict[str, str]:
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


def fluent(message: str, labels: dict[str, str]) -> tuple[str, dict[str, str], datetime | None]:
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
    return rec["log"], labels | clean_labels(more), time_of(rec.get("time")) if rec.get("time") else None


def with_stream(labels: dict[str, str]) -> dict[str, str]:
    """A CloudWatch log stream named after the kubelet's file (Container Insights: <host>-application.var.log.
    containers.<pod>_<namespace>_<container>-<id>.log) names the pod; the name itself stays out of the labels."""
    name = labels.pop("stream_name", None)
    if name and "pod" not in labels and (m := re.search(r"containers\.(.+\.log)$", name)):
        return labels | from_name(Path(m[1]))
    return labels


def labels_of(d: dict[str, Any]) -> dict[str, str]:
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

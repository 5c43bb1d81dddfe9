"""Engine logs wrapped as each log shipper writes them (forensics.intake.shippers cites each format's
documentation): what an investigator exports from the cluster's log pipeline instead of server.log.

wrap(fmt, lines, times, labels) -> (file name, bytes): `lines` are the engine's lines (no newline), `times`
the shipper's time of each (UTC datetimes), `labels` pod / container / host / namespace.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

FORMATS = (
    "docker_json",
    "cri",
    "kubectl",
    "cloudwatch_json",
    "cloudwatch_text",
    "cloudwatch_copy",
    "cloudwatch_csv",
    "loki",
    "logcli",
    "datadog",
    "elasticsearch",
    "journald",
)


def _rfc3339_nano(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _ns(t: datetime) -> int:
    return int(t.timestamp()) * 10**9 + t.microsecond * 1000


def wrap(fmt: str, lines: list[str], times: list[datetime], labels: dict[str, str]) -> tuple[str, bytes]:
    pod, container = labels.get("pod", "pod"), labels.get("container", "sglang")
    host, ns = labels.get("host", "ip-10-0-0-1"), labels.get("namespace", "inference")
    pairs = list(zip(lines, times, strict=True))
    if fmt == "docker_json":  # split a line over 16 KiB as the driver does: partial records without "\n"
        out = []
        for line, t in pairs:
            body = line + "\n"
            chunks = [body[i : i + 16384] for i in range(0, len(body), 16384)]
            out += [json.dumps({"log": c, "stream": "stdout", "time": _rfc3339_nano(t)}) for c in chunks]
        return f"{pod}-json.log", ("\n".join(out) + "\n").encode()
    if fmt == "cri":
        out = []
        for line, t in pairs:
            chunks = [line[i : i + 16384] for i in range(0, len(line), 16384)] or [""]
            out += [
                f"{_rfc3339_nano(t)} stdout {'F' if i == len(chunks) - 1 else 'P'} {c}" for i, c in enumerate(chunks)
            ]
        return "0.log", ("\n".join(out) + "\n").encode()
    if fmt == "kubectl":
        return f"{ns}_{pod}_{container}.log", "".join(f"{_rfc3339_nano(t)} {line}\n" for line, t in pairs).encode()
    if fmt == "cloudwatch_json":
        stream = f"{host}-application.var.log.containers.{pod}_{ns}_{container}-{'ab' * 32}.log"
        events = [{"timestamp": _ms(t), "message": line, "ingestionTime": _ms(t) + 900, "logStreamName": stream,
                   "eventId": f"{_ms(t)}{i:040d}"} for i, (line, t) in enumerate(pairs)]  # fmt: skip
        return "events.json", json.dumps({"events": events, "searchedLogStreams": []}, indent=2).encode()
    if fmt == "cloudwatch_text":
        return "events.txt", "".join(f"EVENTS\t{_ms(t) + 900}\t{line}\t{_ms(t)}\n" for line, t in pairs).encode()
    if fmt == "cloudwatch_copy":
        iso = lambda t: t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"  # noqa: E731
        return "copied.txt", "".join(f"{_ms(t)}\t{iso(t)}\t{line}\n" for line, t in pairs).encode()
    if fmt == "cloudwatch_csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["@timestamp", "@message", "@logStream"])
        stream = f"{host}-application.var.log.containers.{pod}_{ns}_{container}-{'cd' * 32}.log"
        for line, t in pairs:
            w.writerow(
                [t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}", line, stream]
            )
        return "logs-insights-results.csv", buf.getvalue().encode()
    if fmt == "loki":
        stream = {"pod": pod, "container": container, "namespace": ns, "node_name": host, "stream": "stdout"}
        values = [[str(_ns(t)), line] for line, t in pairs]
        doc = {"status": "success", "data": {"resultType": "streams", "result": [{"stream": stream, "values": values}]}}
        return "loki.json", json.dumps(doc).encode()
    if fmt == "logcli":
        lab = {"pod": pod, "container": container, "namespace": ns}
        return "logcli.jsonl", "".join(
            json.dumps({"labels": lab, "line": line, "timestamp": _rfc3339_nano(t)}) + "\n" for line, t in pairs
        ).encode()
    if fmt == "datadog":
        tags = [f"pod_name:{pod}", f"kube_container_name:{container}", f"kube_namespace:{ns}"]
        data = [{"id": f"AQAAA{i:012d}", "type": "log", "attributes": {"message": line,
                 "timestamp": _rfc3339_nano(t)[:23] + "Z", "host": host, "service": "sglang", "status": "info",
                 "tags": tags, "attributes": {}}}
                for i, (line, t) in enumerate(pairs)]  # fmt: skip
        return "datadog.json", json.dumps({"data": data, "links": {}, "meta": {"status": "done"}}).encode()
    if fmt == "elasticsearch":
        hits = [{"_index": ".ds-logs-kubernetes-2026.08.27-000001", "_id": f"id{i}", "_score": None,
                 "_source": {"@timestamp": _rfc3339_nano(t)[:23] + "Z", "message": line, "stream": "stdout",
                             "host": {"name": host}, "container": {"name": container},
                             "kubernetes": {"pod": {"name": pod}, "namespace": ns, "container": {"name": container}}}}
                for i, (line, t) in enumerate(pairs)]  # fmt: skip
        doc = {"took": 5, "timed_out": False, "hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits}}
        return "search.json", json.dumps(doc).encode()
    if fmt == "journald":
        return "journal.json", "".join(
            json.dumps({"__CURSOR": f"s=1;i={i}", "__REALTIME_TIMESTAMP": str(_ns(t) // 1000), "_HOSTNAME": host,
                        "CONTAINER_NAME": pod, "SYSLOG_IDENTIFIER": container, "MESSAGE": line, "PRIORITY": "6"}) + "\n"
            for i, (line, t) in enumerate(pairs)
        ).encode()  # fmt: skip
    raise ValueError(fmt)


def _times(lines: list[str]) -> list[datetime]:
    """A shipper's time per line: 0.4 s after the engine's prefix time (or the JSON record's), else the last."""
    import re

    out: list[datetime] = []
    last = datetime(2026, 1, 1, tzinfo=UTC)
    for line in lines:
        m = re.match(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?", line) or re.match(
            r'^\{"timestamp": "(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?', line
        )
        if m:
            last = datetime.fromisoformat(m[1].replace(" ", "T") + (m[2] or "")).replace(tzinfo=UTC)
        out.append(last)
    return out


def wrap_bundle(src, dst, fmt: str, at_root: bool = False) -> None:  # type: ignore[no-untyped-def]
    """A copy of bundle `src` at `dst` whose engine logs are exported in shipper format `fmt`: each node's
    server.log and requests.jsonl in its folder; with at_root, one export per node directly under engine/
    whose labels name the pod (the node's folder name) and no node folders (formats in LABELLED only).
    journald names the host: bundle.toml [shipper] nodes maps each host to its node."""
    import shutil
    from pathlib import Path

    src, dst = Path(src), Path(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("engine"))
    (dst / "engine").mkdir()
    hosts: dict[str, str] = {}
    for node_dir in sorted(d for d in (src / "engine").iterdir() if d.is_dir()):
        node = node_dir.name
        labels = {"pod": node, "container": "sglang", "host": f"ip-{node}", "namespace": "inference"}
        parts = [p for p in (node_dir / "server.log", node_dir / "requests.jsonl") if p.is_file()]
        if at_root:
            lines = [ln for p in parts for ln in p.read_text(encoding="utf-8").splitlines()]
            name, body = wrap(fmt, lines, _times(lines), labels)
            # the kubelet's /var/log/containers name carries the pod; other exports carry it in their records
            name = f"{node}_inference_sglang-{'0' * 64}.log" if fmt == "cri" else f"{node}.{name}"
            (dst / "engine" / name).write_bytes(body)
            hosts[f"ip-{node}"] = node
            continue
        (dst / "engine" / node).mkdir()
        for p in parts:
            lines = p.read_text(encoding="utf-8").splitlines()
            name, body = wrap(fmt, lines, _times(lines), labels)
            (dst / "engine" / node / f"{p.stem}.{name}").write_bytes(body)
    if hosts:  # journald names the host only: bundle.toml says which node each host is
        toml = dst / "bundle.toml"
        text = toml.read_text(encoding="utf-8") if toml.exists() else ""
        text += (
            '\n[shipper]\nnode_labels = ["pod", "host"]\nnodes = { '
            + ", ".join(f'"{h}" = "{n}"' for h, n in sorted(hosts.items()))
            + " }\n"
        )
        toml.write_text(text, encoding="utf-8")


# the formats whose records (or file names) carry a pod or host label: those that can name the node
LABELLED = tuple(f for f in FORMATS if f not in ("docker_json", "cloudwatch_text", "cloudwatch_copy"))

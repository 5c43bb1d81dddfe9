"""Elastic Common Schema 9.4.0 documents (field definitions from elastic/ecs generated/ecs/ecs_flat.yml at
tag v9.4.0), one JSON document per line, fields nested as ECS' own examples write them.

Findings: event.kind ``alert`` (a detection made outside the Elastic Stack), event.category
``intrusion_detection`` with event.type ``allowed`` (one of that category's expected types: the read was
not stopped), event.outcome ``success`` when the exposure is confirmed and ``unknown`` when the evidence
cannot decide. Watch alerts: the same, outcome ``unknown`` (investigate settles them); the start-up check
(a pool smaller than the context) is category ``configuration``, type ``info``, with no outcome (ECS: not
populated for info events). The account is organization.id (a customer account is an organization, not a
person), the node host.name, the rule rule.name; labels carry the CSV's cells as keyword strings."""

from __future__ import annotations

import json
from typing import Any

from forensics.outputs import fmt_ts
from forensics.siem.model import PRODUCT, VENDOR, Event, version

ECS_VERSION = "9.4.0"


def _labels(pairs: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in pairs.items() if v is not None and v != ""}


def document(ev: Event) -> dict:
    r = ev.row
    event: dict[str, Any] = {
        "kind": "alert",
        "category": ["intrusion_detection"],
        "type": ["allowed"],
        "action": "kv-cache-exposure" if ev.source == "finding" else r["kind"],
        "severity": ev.severity,
        "id": ev.event_id,
        "provider": PRODUCT,
        "dataset": f"kv_forensics.{ev.source}",
    }
    doc: dict[str, Any] = {"@timestamp": fmt_ts(ev.time), "ecs": {"version": ECS_VERSION}}
    if ev.source == "finding":
        event["outcome"] = "success" if r["status"] == "confirmed" else "unknown"
        if r.get("reason"):
            event["reason"] = r["reason"]
        event["start"] = fmt_ts(ev.time)
        doc["organization"] = {"id": r["account_id"]}
        labels = {k: v for k, v in r.items() if k not in ("reason",)}
    else:
        if r["kind"] == "pool_smaller_than_context":
            event["category"], event["type"] = ["configuration"], ["info"]
        else:
            event["outcome"] = "unknown"
        last = r["evidence"][-1] if r["evidence"] else {}
        if last.get("file"):
            doc["log"] = {"file": {"path": str(last["file"])}}
        labels = {
            "alert_kind": r["kind"],
            "node": r["node"],
            "room": r["room"],
            "request_ids": ";".join(str(x) for x in r.get("request_ids") or []),
            "evidence_file": last.get("file"),
            "evidence_line": last.get("line"),
            "evidence_text": last.get("text"),
            "log_time": r.get("log_time"),
            "detected_at": r.get("detected_at"),
        }
    doc["event"] = event
    doc["rule"] = {"name": ev.signature_id, "description": ev.name}
    if ev.host:
        doc["host"] = {"name": ev.host}
    doc["observer"] = {"vendor": VENDOR, "product": PRODUCT, "version": version()}
    doc["labels"] = _labels({"incident_id": ev.incident, **labels})
    doc["message"] = ev.message
    return doc


def render(ev: Event) -> str:
    return json.dumps(document(ev), ensure_ascii=True, separators=(",", ":"))

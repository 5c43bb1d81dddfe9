"""Splunk HTTP Event Collector JSON, as "Format events for HTTP Event Collector" (Splunk Enterprise, Get
data in) defines it: event metadata ``time`` (epoch seconds, milliseconds as the fraction), ``host``,
``source``, ``sourcetype``, ``index`` (optional), and the data in ``event``. Events go one JSON object per
line: /services/collector/event accepts them batched one after another in a request body."""

from __future__ import annotations

import json

from forensics.siem.model import PRODUCT, Event, fields


def document(ev: Event, index: str | None = None) -> dict:
    doc: dict = {
        "time": round(ev.time.timestamp(), 3),
        "host": ev.host or PRODUCT,
        "source": f"{PRODUCT}:{ev.incident}",
        "sourcetype": f"kv_forensics:{ev.source}",
    }
    if index:
        doc["index"] = index
    doc["event"] = {
        "incident_id": ev.incident,
        "event_id": ev.event_id,
        "type": "affected_response" if ev.source == "finding" else "watch_alert",
        "signature_id": ev.signature_id,
        "name": ev.name,
        "severity": ev.severity,
        "message": ev.message,
        **fields(ev),
    }
    return doc


def render(ev: Event, index: str | None = None) -> str:
    # ensure_ascii: the line stays ASCII, so no byte of a hostile value is read as a line break anywhere
    return json.dumps(document(ev, index), ensure_ascii=True, separators=(",", ":"))

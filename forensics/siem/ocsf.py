"""OCSF 1.8.0 Data Security Finding events (class_uid 2006, category 2 Findings), one JSON object per line.

The class as github.com/ocsf/ocsf-schema defines it at tag 1.8.0 (commit 6fa6499a0f8c9f449d342816e90e5f687c224b0a):
events/findings/data_security_finding.json extends events/findings/finding.json (finding_info, the
confidence, status and severity enums), objects/finding_info.json, objects/metadata.json,
objects/product.json, objects/analytic.json, objects/actor.json, objects/user.json, objects/account.json,
objects/device.json, objects/resource_details.json and objects/observable.json. No profile is applied:
without one, the class requires activity_id, category_uid, class_uid, finding_info (its uid), metadata (its
product and version), severity_id, time (milliseconds since the epoch) and type_uid (class_uid * 100 +
activity_id); every *_id written here carries its enum's caption beside it.

A finding (one affected response): the recipient account is the actor (``actor.user.account.uid``: it
attended the data), the decode node the device, each (source request, source account) pair that page
events prove a resource whose owner is that account; the status is the confidence: ``confirmed`` is High,
``indeterminate`` is Other with confidence ``Indeterminate`` (OCSF: "see the confidence attribute, which
contains a data source specific value"), never Low or High, since the evidence decides neither way; the
evidence (page events or the placeholder signature) is finding_info.data_sources. A watch alert: the node
is the device, the confidence Unknown (forensics investigate settles it). The CSV row or the alert, typed,
is ``unmapped``, so no cell is lost.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from forensics.siem.model import PRODUCT, VENDOR, Event, fields, version

OCSF_VERSION = "1.8.0"
CLASS_UID, CLASS_NAME = 2006, "Data Security Finding"
CATEGORY_UID, CATEGORY_NAME = 2, "Findings"
ACTIVITY_CREATE = (1, "Create")
STATUS_NEW = (1, "New")  # the finding's workflow state: the consumer sets it from here on
CONFIDENCE = {"confirmed": (3, "High"), "indeterminate": (99, "Indeterminate")}
CONFIDENCE_UNKNOWN = (0, "Unknown")
DEVICE_SERVER = (1, "Server")
ANALYTIC_RULE = (1, "Rule")
OBSERVABLE_HOSTNAME = (1, "Hostname")
OBSERVABLE_ACCOUNT_UID = (35, "Account Object: uid")
EVIDENCE_SOURCE = {
    "pages": "page events",
    "signature": "engine logs (the placeholder signature)",
    "none": "none (no page events, and no engine line read decides it)",
}
STATUS_DETAIL = {
    "confirmed": "confirmed: the evidence proves the response attended another request's KV cache",
    "indeterminate": "indeterminate: the evidence can neither prove nor rule out the exposure",
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def severity(cef_severity: int) -> tuple[int, str]:
    """The CEF 0-10 scale's bands (9-10 Very-High, 7-8 High, 4-6 Medium, 0-3 Low) as OCSF severity_id."""
    if cef_severity >= 9:
        return 5, "Critical"
    if cef_severity >= 7:
        return 4, "High"
    if cef_severity >= 4:
        return 3, "Medium"
    return 2, "Low"


def _ms(when: datetime) -> int:
    """OCSF timestamp_t: milliseconds since the epoch, in integers."""
    return (when - EPOCH) // timedelta(milliseconds=1)


def _account(uid: str) -> dict[str, Any]:
    return {"account": {"uid": uid}}


def _observable(path: str, kind: tuple[int, str], value: str) -> dict[str, Any]:
    return {"name": path, "type_id": kind[0], "type": kind[1], "value": value}


def document(ev: Event) -> dict[str, Any]:
    r = ev.row
    sev_id, sev = severity(ev.severity)
    doc: dict[str, Any] = {
        "class_uid": CLASS_UID,
        "class_name": CLASS_NAME,
        "category_uid": CATEGORY_UID,
        "category_name": CATEGORY_NAME,
        "activity_id": ACTIVITY_CREATE[0],
        "activity_name": ACTIVITY_CREATE[1],
        "type_uid": CLASS_UID * 100 + ACTIVITY_CREATE[0],
        "type_name": f"{CLASS_NAME}: {ACTIVITY_CREATE[1]}",
        "time": _ms(ev.time),
        "severity_id": sev_id,
        "severity": sev,
        "status_id": STATUS_NEW[0],
        "status": STATUS_NEW[1],
        "is_alert": True,
        "message": ev.message,
    }
    info: dict[str, Any] = {
        "uid": ev.event_id,
        "title": ev.name,
        "analytic": {"type_id": ANALYTIC_RULE[0], "type": ANALYTIC_RULE[1], "name": ev.signature_id},
    }
    observables = []
    if ev.host:
        doc["device"] = {"type_id": DEVICE_SERVER[0], "type": DEVICE_SERVER[1], "hostname": ev.host}
        observables.append(_observable("device.hostname", OBSERVABLE_HOSTNAME, ev.host))
    if ev.source == "finding":
        status = r["status"]
        doc["confidence_id"], doc["confidence"] = CONFIDENCE.get(status, CONFIDENCE_UNKNOWN)
        doc["status_code"] = status
        if status in STATUS_DETAIL:
            doc["status_detail"] = STATUS_DETAIL[status]
        if r["first_exposed_at"]:  # else ev.time is the run's, not a first sighting
            info["first_seen_time"] = doc["time"]
        info["types"] = ["KV cache exposure"]
        if r["evidence"]:
            info["data_sources"] = [EVIDENCE_SOURCE.get(r["evidence"], r["evidence"])]
        doc["actor"] = {"user": _account(r["account_id"])}
        observables.append(_observable("actor.user.account.uid", OBSERVABLE_ACCOUNT_UID, r["account_id"]))
        resources = [
            {"type": "KV cache", "uid": req, "owner": _account(acct), **({"hostname": ev.host} if ev.host else {})}
            for req, acct in ev.sources
        ]
        if resources:
            doc["resources"] = resources
        for acct in sorted({acct for _, acct in ev.sources}):
            observables.append(_observable("resources.owner.account.uid", OBSERVABLE_ACCOUNT_UID, acct))
    else:
        doc["confidence_id"], doc["confidence"] = CONFIDENCE_UNKNOWN
        doc["status_detail"] = "a watch alert: forensics investigate settles it"
        info["types"] = [r["kind"]]
        info["data_sources"] = ["engine logs (forensics watch)"]
    doc["finding_info"] = info
    doc["metadata"] = {
        "version": OCSF_VERSION,
        "product": {"name": PRODUCT, "vendor_name": VENDOR, "version": version()},
        "uid": ev.event_id,
        "correlation_uid": ev.incident,
        "log_name": "affected_responses" if ev.source == "finding" else "watch_alerts",
    }
    if observables:
        doc["observables"] = observables
    doc["unmapped"] = {"incident_id": ev.incident, **fields(ev)}
    return doc


def render(ev: Event) -> str:
    # ensure_ascii: the line stays ASCII, so no byte of a hostile value is read as a line break anywhere
    return json.dumps(document(ev), ensure_ascii=True, separators=(",", ":"))

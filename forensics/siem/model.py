"""The SIEM event, format-neutral, and what the three formats share (forensics.siem)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import forensics
from forensics.errors import InputError

VENDOR = "KV Forensics"
PRODUCT = "kv-forensics"
INT_COLUMNS = ("exposed_slots", "source_requests", "http_status", "completion_tokens")


@dataclass
class Event:
    """One SIEM event, format-neutral: a finding (one affected response) or a watch alert."""

    source: str  # "finding" or "alert"
    signature_id: str  # CEF Signature ID, ECS rule.name, HEC event.signature_id
    name: str
    severity: int
    time: datetime
    event_id: str
    message: str
    host: str  # the decode node (finding) or the alert's node
    incident: str
    row: dict[str, Any] = field(default_factory=dict)  # the CSV row or the alert, as read
    sources: list[tuple[str, str]] = field(default_factory=list)  # (source request, its account): exposures.csv


def version() -> str:
    return forensics.__version__


def _int(text: str) -> int | str | None:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return text  # kept as written: the SIEM shows what the CSV says


def fields(ev: Event) -> dict[str, Any]:
    """The event's data, typed for JSON: the CSV's columns (integers as numbers, empty as null, the room
    as a string: 64-bit ids lose digits as JSON numbers), or the alert's fields as watch wrote them."""
    if ev.source == "finding":
        out: dict[str, Any] = {}
        for k, v in ev.row.items():
            if k == "source_accounts":
                out[k] = v.split(";") if v else []
            elif k in INT_COLUMNS:
                out[k] = _int(v)
            else:
                out[k] = v if v != "" else None
        return out
    keys = ("kind", "node", "room", "request_ids", "evidence", "log_time", "detected_at", "summary")
    return {k: ev.row.get(k) for k in keys}


def parse_ts(text: str, where: str) -> datetime:
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where}: {text!r} is not an ISO 8601 time") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)

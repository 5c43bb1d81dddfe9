"""Watch alerts as SIEM events (forensics.siem): one per line of a watch alerts file, its strings held
to the CSV outputs' formula rule (they come straight from logs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.outputs import neutralize
from forensics.siem.model import Event, parse_ts

ALERT_SEVERITY = {
    "exposure": 8,
    "canary_violation": 8,
    "placeholder_signature": 7,
    "checksum_mismatch": 7,
    "late_transfer": 6,
    "nixl_expired": 6,
    "nixl_failure": 5,
    "pool_smaller_than_context": 4,
    "mooncake_failure": 4,
}
UNKNOWN_ALERT_SEVERITY = 5


def _clean_alert(value: Any) -> Any:
    """Alert strings come straight from logs: the CSV outputs' formula rule applies to them too."""
    if isinstance(value, str):
        return neutralize(value)
    if isinstance(value, list):
        return [_clean_alert(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_alert(v) for k, v in value.items()}
    return value


def alerts(path: Path, incident: str) -> Iterator[Event]:
    try:
        f = path.open("rb")
    except OSError as err:
        raise InputError(f"{path}: {err.strerror or err}") from None
    with f:
        for n, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}: line {n}: not UTF-8") from None
            if not line.strip():
                continue
            try:
                a = json.loads(line)
            except (ValueError, RecursionError) as err:  # RecursionError: nested too deep to read
                why = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deep"
                raise InputError(f"{path}: line {n}: not JSON ({why})") from None
            if not isinstance(a, dict) or not isinstance(a.get("kind"), str) or not isinstance(a.get("node"), str):
                raise InputError(f"{path}: line {n}: not a watch alert (needs kind and node)")
            when = a.get("log_time") or a.get("detected_at")
            if not isinstance(when, str):
                raise InputError(f"{path}: line {n}: no log_time or detected_at")
            ts = parse_ts(when, f"{path}: line {n}: log_time")
            a = _clean_alert(a)
            ev = a.get("evidence") if isinstance(a.get("evidence"), list) else []
            a["evidence"] = [e for e in ev if isinstance(e, dict)]
            room = a.get("room")
            a["room"] = "" if room is None else str(room)  # 64-bit ids: a JSON number loses digits
            kind, node = a["kind"], a["node"]
            yield Event(
                source="alert",
                signature_id=f"kvf-alert-{kind}",
                name=f"KV leak alert ({kind})",
                severity=ALERT_SEVERITY.get(kind, UNKNOWN_ALERT_SEVERITY),
                time=ts,
                event_id=f"{incident}:alert:{kind}:{a['room'] or node}",
                message=str(a.get("summary") or kind),
                host=node,
                incident=incident,
                row=a,
            )

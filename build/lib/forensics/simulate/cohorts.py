"""Traffic cohorts as in spec section 5: the simulator's own matcher and the exclusions.toml text.

Deliberately independent of the analysis code: the truth must not share its bugs.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase

from forensics.simulate.config import S

CUSTOMER = "customer"


@dataclass
class Cohort:
    name: str
    kind: str
    matches: list[dict[str, object]] = field(default_factory=list)


def _ts_us(iso: str) -> int:
    return int(round(datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC).timestamp() * S))


def table_matches(table: dict[str, object], req: dict[str, object]) -> bool:
    """ALL keys of one match table must match; a list key matches if ANY element does."""
    for key, want in table.items():
        if key == "accounts":
            ok = req["account_id"] in want  # type: ignore[operator]
        elif key == "api_tokens":
            ok = req["api_token_id"] in want  # type: ignore[operator]
        elif key == "models":
            ok = req["model"] in want  # type: ignore[operator]
        elif key == "user_agents":
            ok = any(fnmatchcase(str(req["user_agent"]), str(g)) for g in want)  # type: ignore[attr-defined]
        elif key == "client_cidrs":
            ip = ipaddress.ip_address(str(req["client_ip"]))
            ok = any(ip in ipaddress.ip_network(str(c), strict=False) for c in want)  # type: ignore[attr-defined]
        elif key == "headers":
            hdrs = req.get("headers") or {}
            ok = all(hdrs.get(k) == v for k, v in want.items())  # type: ignore[attr-defined,union-attr]
        elif key == "after":
            ok = int(req["ts_us"]) >= _ts_us(str(want))  # type: ignore[call-overload]
        elif key == "before":
            ok = int(req["ts_us"]) < _ts_us(str(want))  # type: ignore[call-overload]
        else:
            raise ValueError(f"unknown cohort match key {key!r}")
        if not ok:
            return False
    return True


def cohort_of(cohorts: list[Cohort], req: dict[str, object]) -> str:
    """First cohort in file order with a matching table; otherwise customer."""
    for c in cohorts:
        if any(table_matches(m, req) for m in c.matches):
            return c.name
    return CUSTOMER


def _toml_value(v: object) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def exclusions_toml(cohorts: list[Cohort]) -> str:
    lines = ["# Traffic cohorts (spec section 5). Written by `forensics simulate`."]
    for c in cohorts:
        lines += ["", "[[cohort]]", f"name = {json.dumps(c.name)}", f"kind = {json.dumps(c.kind)}"]
        for m in c.matches:
            lines.append("[[cohort.match]]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in m.items()]
    return "\n".join(lines) + "\n"

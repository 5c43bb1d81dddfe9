"""Intake, bundle.toml [disclosure]: its keys and their checks (types, times, the timeline), and through
forensics.intake.jurisdictions the jurisdictions table and the accounts' jurisdictions it names.
forensics.report.disclosure says which fields are still missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.intake.jurisdictions import disclosure_files
from forensics.intake.times import parse_utc

# the disclosure fields a person must supply (forensics.report.disclosure says which are missing)
DISCLOSURE_KEYS = {
    "role",
    "awareness_basis",
    "data_categories",
    "data_subjects",
    "consequences",
    "advice",
    "probing_searched",
    "hipaa",
    "sec_8k",
    "materiality_determined_at",
    "eu_ai_act",
    "timeline",
    # the notified accounts' jurisdictions and the rules applied to them (forensics.intake.jurisdictions)
    "jurisdictions_file",
    "accounts_file",
    "individuals_notified_at",
    # the GDPR Art. 33 form's fields only a person can fill (forensics.report.edpb)
    "controller",
    "dpo",
    "member_states",
    "prior_measures",
    "delay_reasons",
}


DISCLOSURE_ROLES = ("processor", "controller")


def check_disclosure(path: Path, d: dict[str, Any]) -> dict[str, Any]:
    """[disclosure] with its types checked: flags are booleans, times RFC 3339, the timeline a list of
    {at, event, source} tables, data_categories a list of strings."""
    out = dict(d)
    where = f"{path}: [disclosure]"
    if "role" in d and d["role"] not in DISCLOSURE_ROLES:
        raise InputError(f"{where} role {d['role']!r} must be one of {', '.join(DISCLOSURE_ROLES)}")
    for flag in ("hipaa", "sec_8k", "eu_ai_act"):
        if flag in d and not isinstance(d[flag], bool):
            raise InputError(f"{where} {flag} must be true or false, not {d[flag]!r}")
    for key in ("controller", "dpo", "member_states", "prior_measures", "delay_reasons"):
        if key in d and not isinstance(d[key], str):
            raise InputError(f"{where} {key} must be a string, not {d[key]!r}")
    for key in ("materiality_determined_at", "individuals_notified_at"):
        if key in d:
            out[key] = parse_utc(d[key], f"{where} {key}")
    out["jurisdictions"] = disclosure_files(path, d, where)
    cats = d.get("data_categories")
    if cats is not None and not (isinstance(cats, list) and all(isinstance(c, str) for c in cats)):
        raise InputError(f'{where} data_categories must be a list of strings, e.g. ["prompt text", "names"]')
    rows = d.get("timeline", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{where} timeline must be an array of tables ([[disclosure.timeline]])")
    timeline = []
    for i, r in enumerate(rows, start=1):
        missing = [k for k in ("at", "event", "source") if not r.get(k)]
        if missing:
            raise InputError(f"{where} timeline entry {i} lacks {', '.join(missing)} (each needs at, event, source)")
        timeline.append(
            {"at": parse_utc(r["at"], f"{where} timeline entry {i} at"), **{k: str(r[k]) for k in ("event", "source")}}
        )
    out["timeline"] = timeline
    return out

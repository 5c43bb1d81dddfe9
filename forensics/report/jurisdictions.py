"""Report stage, the notification rules applied: the regimes' deadlines of section 1 and the table of
the notified accounts' jurisdictions, from the rules table bundle.toml names (or the tool's own,
jurisdictions.toml beside this module), read and checked by forensics.intake.jurisdictions.

Every deadline names its statute, its source and the day that source was read. An account the operator
mapped to no jurisdiction is counted under "unknown", never dropped; a threshold on residents binds
only where the supplied counts prove it, and is "to assess" where they cannot decide.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from forensics.intake import BundleConfig
from forensics.intake.jurisdictions import Residence, Rule

UNKNOWN = "unknown"  # the row of the accounts whose jurisdiction nobody supplied
# where each clock's starting event is supplied
EVENT_KEYS = {
    "discovered_at": "[incident] discovered_at",
    "materiality_determined_at": "[disclosure] materiality_determined_at",
    "individuals_notified_at": "[disclosure] individuals_notified_at",
}


def add_business_days(start: datetime, days: int) -> datetime:
    """`days` working days after `start` (Saturdays and Sundays skipped; public holidays are not known
    here, so the date may be later in fact: the report says so)."""
    t = start
    while days:
        t += timedelta(days=1)
        if t.weekday() < 5:
            days -= 1
    return t


def _due(rule: Rule, start: datetime) -> datetime:
    if rule.unit == "hours":
        return start + timedelta(hours=rule.amount)
    if rule.unit == "days":
        return start + timedelta(days=rule.amount)
    if rule.unit == "business_days":
        return add_business_days(start, rule.amount)
    return start  # "without undue delay": the clock is already running from the event


def deadline(rule: Rule, config: BundleConfig, as_of: datetime | None) -> dict[str, Any]:
    """One rule's deadline: its due time (None where the starting event is not supplied: `missing`
    names the key), the hours left against --as-of, and where the rule was read."""
    events = {"discovered_at": config.discovered_at, **config.disclosure}
    start = events.get(rule.after)
    due = _due(rule, start) if isinstance(start, datetime) else None
    return {
        "name": rule.name,
        "notify": rule.notify,
        "basis": rule.basis,
        "due": due,
        "hours_left": (due - as_of).total_seconds() / 3600 if due and as_of else None,
        "missing": "" if due else EVENT_KEYS[rule.after],
        "statute": rule.statute,
        "source": rule.source,
        "read_on": rule.read_on.isoformat(),
        "note": rule.note,
    }


def _applies(rule: Rule, config: BundleConfig) -> bool:
    """Whether a regime's rule is shown in section 1: always, by [disclosure] role, or by its flag."""
    kind, _, value = rule.applies.partition("=")
    if kind == "role":
        return bool(config.disclosure.get("role") == value)
    if kind == "flag":
        return bool(config.disclosure.get(value))
    return rule.applies == "always"


def regime_deadlines(config: BundleConfig, as_of: datetime | None) -> list[dict[str, Any]]:
    """Section 1's clocks: the rules that apply to every incident, or by bundle.toml's role and flags
    (GDPR always: the tool cannot rule it out), in the table's order."""
    rules: tuple[Rule, ...] = config.disclosure["jurisdictions"]["rules"]
    return [deadline(r, config, as_of) for r in rules if r.applies != "accounts" and _applies(r, config)]


def _threshold(rule: Rule, places: list[Residence]) -> str:
    """Whether a rule's threshold on residents binds: by the residents the operator supplied; where
    some accounts have no count, only a known sum already over it decides."""
    if rule.min_residents is None:
        return ""
    known = sum(p.residents or 0 for p in places)
    blank = sum(p.residents is None for p in places)
    if known >= rule.min_residents:
        return f"applies: {known:,} residents supplied, the threshold is {rule.min_residents:,}"
    if not blank:
        return f"does not apply: {known:,} residents supplied, below {rule.min_residents:,}"
    return (
        f"to assess: applies from {rule.min_residents:,} residents; {known:,} supplied, and {blank:,} "
        f"account{'s' if blank != 1 else ''} without a count ([disclosure] accounts_file, residents)"
    )


def jurisdiction_rows(config: BundleConfig, account_ids: list[str], as_of: datetime | None) -> dict[str, Any]:
    """The notified accounts by jurisdiction: one row per jurisdiction (codes in order, "unknown" last),
    with the accounts notified there, the residents supplied, and each of its rules' deadlines. Every
    notified account is counted: under each of its jurisdictions, or under "unknown"."""
    j = config.disclosure["jurisdictions"]
    rules: tuple[Rule, ...] = j["rules"]
    mapped: dict[str, tuple[Residence, ...]] = j["accounts"]
    places: dict[str, list[Residence]] = defaultdict(list)
    unknown = 0
    for account in account_ids:
        for place in mapped.get(account, ()):
            places[place.jurisdiction].append(place)
        unknown += account not in mapped
    rows = []
    for code in sorted(places):
        here = places[code]
        own = [r for r in rules if r.jurisdiction == code and (r.applies == "accounts" or _applies(r, config))]
        rows.append(
            {
                "jurisdiction": code,
                "accounts": len(here),
                "residents": sum(p.residents or 0 for p in here),
                "residents_unknown": sum(p.residents is None for p in here),
                "deadlines": [dict(deadline(r, config, as_of), threshold=_threshold(r, here)) for r in own],
            }
        )
    if unknown:
        blank = {"residents": 0, "residents_unknown": unknown, "deadlines": []}
        rows.append({"jurisdiction": UNKNOWN, "accounts": unknown, **blank})
    return {
        "rows": rows,
        "rules_file": j["rules_file"],
        "accounts_file": config.disclosure.get("accounts_file"),
        "notified": len(account_ids),
    }

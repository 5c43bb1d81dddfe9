"""Report stage, disclosure fields: what a notification must contain (GDPR Art. 33(3) and 34, HIPAA
164.404-164.410, SEC Form 8-K Item 1.05, EU AI Act Art. 73; docs/notices.md cites each), each
filled from the findings where the tool knows it and from bundle.toml where a person must supply it
([incident], [remediation], [disclosure]); a field nobody supplied is listed as missing, not left out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from forensics.intake import BundleConfig
from forensics.outputs import fmt_ts
from forensics.report.jurisdictions import regime_deadlines
from forensics.report.render import f_plain


def deadlines(config: BundleConfig, as_of: datetime | None) -> list[dict[str, Any]]:
    """The clocks that apply: GDPR always (the tool cannot rule it out), the others when bundle.toml
    flags them ([disclosure] hipaa, sec_8k, eu_ai_act); each rule, its clock and its source are in the
    jurisdictions table (forensics/report/jurisdictions.toml, or the operator's)."""
    return regime_deadlines(config, as_of)


def timeline(config: BundleConfig, clocks: dict[str, Any], as_of: datetime | None) -> list[dict[str, Any]]:
    """The incident's timeline, one row per event with its source: the findings' own moments, the
    bundle's declared ones, and the [[disclosure.timeline]] rows a person added."""
    rows = [
        (
            clocks["first_at"],
            "First affected response (all cohorts)",
            "affected_responses.csv, earliest first_exposed_at",
        ),
        (
            clocks["first_customer_at"],
            "First customer response that may be affected (the window's start)",
            "affected_responses.csv, cohort customer, any status",
        ),
        (  # beside the window's start where that one is not confirmed
            clocks["first_customer_confirmed_at"]
            if clocks["first_customer_confirmed_at"] != clocks["first_customer_at"]
            else None,
            "First confirmed affected customer response",
            "affected_responses.csv, cohort customer, status confirmed",
        ),
        (clocks["last_customer_at"], "Last affected customer response", "affected_responses.csv, cohort customer"),
        (clocks["last_at"], "Last affected response (all cohorts)", "affected_responses.csv, latest first_exposed_at"),
        (config.discovered_at, "Discovered (awareness)", "bundle.toml [incident] discovered_at"),
        (
            config.disclosure.get("materiality_determined_at"),
            "Materiality determined",
            "bundle.toml [disclosure] materiality_determined_at",
        ),
        (as_of, "This report's figures", "--as-of"),
    ]
    out = [{"at": at, "event": event, "source": source} for at, event, source in rows if at is not None]
    out += [dict(r) for r in config.disclosure.get("timeline", [])]
    return sorted(out, key=lambda r: (r["at"], r["event"]))


def fields(
    config: BundleConfig, totals: dict[str, Any], found: dict[str, Any], contact: str, as_of: datetime | None
) -> list[dict[str, Any]]:
    """Every disclosure field: `known` is what the findings say, `supplied` what bundle.toml says,
    `missing` names the bundle.toml key (or the option) a person must still fill in ('' when nothing is
    missing). The report's own date is one: a run without --as-of stays reproducible and undated."""
    d = config.disclosure
    srcs_lo, srcs_hi = totals["customer_sources"], totals.get("possible_customer_sources")
    accts_lo, accts_hi = totals["customer_source_accounts"], totals.get("possible_customer_source_accounts")
    bounded = bool(totals.get("unknown_source_responses"))
    records = (
        f"at least {srcs_lo:,} customer requests (prompts) confirmed exposed, up to {srcs_hi:,} possibly "
        f"({totals['bound']['requests']}; {totals['bound']['accounts']})"
        if bounded
        else f"{srcs_lo:,} customer requests (prompts) exposed"
    )
    tenants = (
        f"at least {accts_lo:,} customer accounts on the source side, up to {accts_hi:,}; "
        if bounded
        else f"{accts_lo:,} customer accounts on the source side; "
    ) + f"{totals['accounts_after']:,} customer accounts received affected responses"
    role = d.get("role")
    framing = {
        "processor": "We process this data on our customers' behalf (processor): each affected customer is the "
        "controller, notified by us without undue delay (GDPR Art. 33(2)); they notify their authorities "
        "and data subjects.",
        "controller": "We are the controller of this data: we notify the supervisory authority (Art. 33) and, "
        "where the risk is high, the data subjects (Art. 34).",
    }
    researcher = found.get("researcher_requests")
    rows = [
        ("Date of this report", fmt_ts(as_of) if as_of else "", "", "" if as_of else "undated: rerun with --as-of"),
        ("Role (controller or processor)", framing.get(str(role), ""), "", "" if role else "[disclosure] role"),
        ("Contact point (Art. 33(3)(b))", contact, "", "" if contact else "[incident] contact"),
        (
            "Awareness basis",
            "",
            str(d.get("awareness_basis", "")),
            "" if d.get("awareness_basis") else "[disclosure] awareness_basis",
        ),
        (
            "Data categories",
            "Prompt and output content of the source requests, as the model's KV cache (token-level internal "
            "form) that recipients' responses were computed over; the tool does not read content, so which "
            "personal or special-category data it held must be assessed",
            "; ".join(d.get("data_categories", [])),
            "" if d.get("data_categories") else "[disclosure] data_categories",
        ),
        ("Approximate number of records", records, "", ""),
        (
            "Approximate number of data subjects",
            tenants + "; the people behind each account are not in the evidence",
            str(d.get("data_subjects", "")),
            "" if d.get("data_subjects") else "[disclosure] data_subjects",
        ),
        (
            "Likely consequences (Art. 33(3)(c))",
            "Fragments of a source request's prompt could influence, and may be reproduced in, the text "
            "delivered to the recipient, who may be another customer",
            str(d.get("consequences", "")),
            "" if d.get("consequences") else "[disclosure] consequences",
        ),
        (
            "Measures taken or proposed (Art. 33(3)(d))",
            "",
            "; ".join(f"{k}: {f_plain(v)}" for k, v in sorted(config.remediation.items())),
            "" if config.remediation else "[remediation]",
        ),
        (
            "Advice to individuals (Art. 34; HIPAA 164.404(c))",
            "",
            str(d.get("advice", "")),
            "" if d.get("advice") else "[disclosure] advice",
        ),
        (
            "Probing or exploitation searched for",
            (
                f"{researcher:,} requests of the researcher cohort (exclusion rules) reproduced the leak; "
                if researcher
                else ""
            )
            + "the tool does not search for probing patterns itself",
            str(d.get("probing_searched", "")),
            "" if d.get("probing_searched") else "[disclosure] probing_searched",
        ),
    ]
    return [{"field": f, "known": k, "supplied": s, "missing": m} for f, k, s, m in rows]


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _span(first: datetime | None, last: datetime | None) -> str:
    if first is None:
        return "unknown"
    a, b = first.strftime("%Y-%m-%d"), (last or first).strftime("%Y-%m-%d")
    return a if a == b else f"{a} to {b}"


def _sure(got: int, sure: int) -> str:
    if sure == got:
        return "confirmed"
    return "none confirmed, all indeterminate" if not sure else f"{sure:,} confirmed, {got - sure:,} indeterminate"


def _dates(first: datetime | None, last: datetime | None) -> str:
    """An account's own moments, to the millisecond: "2026-09-07T23:24:32.331Z", or "from A to B"."""
    if first is None:
        return "unknown"
    return fmt_ts(first) if last is None or last == first else f"from {fmt_ts(first)} to {fmt_ts(last)}"


def _received_tell(got: int, sure: int, own: int) -> str:
    """What to tell an account about the responses it received: over other customers' data, or (where every
    pair found is of its own requests) over its own account's data only. "were" is said of the confirmed
    ones only; the indeterminate ones "may have been": the evidence can neither prove nor rule it out."""
    own_only = "data of other requests of your own account (no other customer's)"
    whose = own_only if own == got else "other customers' data"
    undecided = got - sure
    if not sure:
        said = (
            f"{_n(got, 'response')} you received may have been computed over memory holding {whose} (the "
            "evidence can neither prove nor rule it out)"
        )
    elif undecided:
        said = (
            f"{_n(sure, 'response')} you received {'was' if sure == 1 else 'were'} computed over memory holding "
            f"{whose}, and {undecided:,} more may have been, which the evidence can neither prove nor rule out"
        )
    else:
        were = "was" if got == 1 else "were"
        said = f"{_n(got, 'response')} you received {were} computed over memory holding {whose}"
    if own == got:
        return (
            f"{said}; the text may contain fragments of them: this may matter between your own end users; do "
            "not rely on, forward or publish it."
        )
    also = f" ({own:,} of them over your own account's data only)" if own else ""
    return (
        f"{said}{also}; the text may contain fragments of it: do not rely on, forward or publish it, and "
        "delete stored copies."
    )


def _exposed_tell(n: dict[str, Any]) -> str:
    """What to tell an account whose requests' data others' responses attended: confirmed pairs "was",
    indeterminate ones "may have been"."""
    exp, sure = n["requests_exposed"], n["requests_exposed_confirmed"]
    who = f"(recipients: {n['recipient_cohorts'] or 'unknown'})"
    if sure == exp:
        said = (
            f"Data from {_n(exp, 'request')} of yours was in memory that responses to other requests were "
            f"computed over {who}"
        )
    elif not sure:
        said = (
            f"Data from {_n(exp, 'request')} of yours may have been in memory that responses to other requests "
            f"were computed over {who}: the evidence can neither prove nor rule it out"
        )
    else:
        said = (
            f"Data from {_n(sure, 'request')} of yours was in memory that responses to other requests were "
            f"computed over {who}, and from {exp - sure:,} more may have been (the evidence cannot decide)"
        )
    return f"{said}; fragments of your prompts could have appeared in those responses."


# the roles of an account in the disclosure, in the order a notice tells them (account_requests.role)
ROLES = ("received", "exposed", "possibly_exposed")


def account_roles(n: dict[str, Any]) -> list[dict[str, Any]]:
    """One account's roles (a row of notifications.csv: both directions), in plain language: what
    happened, when, how sure, what to tell. The notification annex and the per-account notices print
    these same sentences."""
    got, sure = n["responses_received"], n["responses_received_confirmed"]
    own = n["responses_received_same_account_only"]
    exp, exp_sure = n["requests_exposed"], n["requests_exposed_confirmed"]
    possible, likely = n["requests_possibly_exposed"], n["requests_likely_exposed"]
    may = "" if sure else "may have "
    roles = [
        {
            "key": "received",
            "role": f"{may}received others' data" if own < got else f"{may}received its own account's data",
            "requests": got,
            "confirmed": sure,
            "same_account_only": own,
            "when": _span(n["received_first_at"], n["received_last_at"]),
            # the account's own moments: every response that may be affected, the confirmed ones beside
            "dates": _dates(n["received_first_at"], n["received_last_at"]),
            "confirmed_dates": "none"
            if not sure
            else _dates(n["received_confirmed_first_at"], n["received_confirmed_last_at"])
            if sure < got
            else "",
            "confidence": _sure(got, sure),
            "tell": _received_tell(got, sure, own),
        },
        {
            "key": "exposed",
            "role": "its data was exposed" if exp_sure else "its data may have been exposed",
            "requests": exp,
            "confirmed": exp_sure,
            "when": _span(n["exposed_first_at"], n["exposed_last_at"]),
            "dates": _dates(n["exposed_first_at"], n["exposed_last_at"]),
            "confirmed_dates": "" if exp_sure else "none",
            "confidence": _sure(exp, exp_sure),
            "tell": _exposed_tell(n),
        },
        {
            "key": "possibly_exposed",
            "role": "its data may have been exposed",
            "requests": possible,
            "likely": likely,
            "when": "time unknown",
            "dates": "unknown",
            "confirmed_dates": "none",
            "confidence": "possible; the logs cannot rank which"
            if likely is None
            else f"possible; {likely:,} rated likely by the allocator model",
            "tell": f"Up to {_n(possible, 'request')} of yours may have been in memory that other responses were "
            "computed over, on a server that kept no page records: we cannot confirm which.",
        },
    ]
    return [r for r in roles if r["requests"]]


def _cell(r: dict[str, Any]) -> str:
    """A role as the annex's table cell: the count and, in brackets, what is less than certain."""
    n, key = r["requests"], r["key"]
    if key == "possibly_exposed":
        return f"up to {n:,}" + ("" if r["likely"] is None else f" ({r['likely']:,} likely)")
    notes = [f"{n - r['confirmed']:,} indeterminate"] if r["confirmed"] < n else []
    own = r.get("same_account_only", 0)
    if own:
        notes.append("all own account" if own == n else f"{own:,} own account only")
    return f"{n:,}" + (f" ({'; '.join(notes)})" if notes else "")


def notification_rows(notifications: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notification annex: one row per account (the rows of notifications.csv) with its roles, each
    role's table cell, and the dates over which what it received or gave happened."""
    out = []
    for n in notifications:
        roles = {r["key"]: dict(r, cell=_cell(r)) for r in account_roles(n)}
        firsts = [t for t in (n["received_first_at"], n["exposed_first_at"]) if t is not None]
        lasts = [t for t in (n["received_last_at"], n["exposed_last_at"]) if t is not None]
        when = _span(min(firsts), max(lasts)) if firsts else "unknown"
        cells = {key: roles[key]["cell"] if key in roles else "—" for key in ROLES}
        out.append({**n, "roles": roles, "cells": cells, "when": when})
    return out

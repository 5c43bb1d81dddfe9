"""Report stage, the GDPR Art. 33 notification form (edpb_art33.html, edpb_art33.md): the sections of the
common template the EDPB adopted for consultation on 10 June 2026, each field filled from the findings
or bundle.toml where they can fill it, and left visibly open, with the bundle.toml key that fills it,
where they cannot.

The template's own text was not found; the form follows GDPR Art. 33(3)-(5) and the published summaries
of the template's sections (SOURCES), and says so in its header. Every value is the report's own (the
disclosure fields, the clocks, the notification annex): nothing is computed twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from forensics.intake import BundleConfig
from forensics.outputs import fmt_ts
from forensics.report.jurisdictions import deadline

# where the form's sections come from: the template's own text was not found, these summaries were
SOURCES: tuple[tuple[str, str], ...] = (
    ("Hayes Solicitors, the template's sections", "https://hayes-solicitors.ie/news/public-consultation-for-draft-data-breach-notification-template/"),
    ("Pinsent Masons, its 125 questions", "https://www.pinsentmasons.com/en-gb/out-law/news/data-breach-notification-template-developed-eu-gdpr"),
    ("Agence Europe, its adoption on 10 June 2026", "https://agenceurope.eu/en/bulletin/article/13886/11/european-data-protection-board-adopts-common-template-for-notification-of-personal-data-breaches"),
)  # fmt: skip


def _field(label: str, value: str, missing: str = "") -> dict[str, str]:
    return {"label": label, "value": value, "missing": "" if value and not missing else missing}


def _supplied(config: BundleConfig, key: str, label: str) -> dict[str, str]:
    """A field only a person can fill: its [disclosure] key's value, or the key named as missing."""
    value = config.disclosure.get(key)
    text = "" if value is None else fmt_ts(value) if isinstance(value, datetime) else str(value)
    return _field(label, text, "" if text else f"[disclosure] {key}")


def _report_field(fields: dict[str, dict[str, Any]], name: str, label: str) -> dict[str, str]:
    """A field of the report's section 4, as it is there: the findings' part, then what bundle.toml supplied."""
    f = fields[name]
    value = "; supplied: ".join(v for v in (f["known"], f["supplied"]) if v)
    return {"label": label, "value": value, "missing": f["missing"]}


def _lateness(config: BundleConfig, as_of: Any) -> dict[str, str]:
    """Art. 33(1): a notification after 72 h gives the reasons for the delay. The due time is the rules
    table's (jurisdictions.toml's GDPR Art. 33 rule, or the operator's), not a second copy of it here."""
    disc = config.discovered_at
    label = "Notified within 72 hours of awareness? (Art. 33(1))"
    if disc is None:
        return _field(label, "", "[incident] discovered_at")
    if as_of is None:
        return _field(label, "", "--as-of (rerun with the date of this filing)")
    rules = config.disclosure["jurisdictions"]["rules"]
    rule = next((r for r in rules if r.name.startswith("GDPR Art. 33:")), None)
    if rule is None:
        return _field(label, "", "[disclosure] jurisdictions_file (it has no GDPR Art. 33 rule)")
    due = deadline(rule, config, as_of)["due"]
    if as_of <= due:
        hours = (due - disc).total_seconds() / 3600
        clock = f"due {fmt_ts(due)}: {hours:g} h after {fmt_ts(disc)}"
        return _field(label, f"yes, if filed at this form's as-of time {fmt_ts(as_of)} ({clock})")
    reasons = config.disclosure.get("delay_reasons")
    return _field(
        label,
        f"no: this form's as-of time {fmt_ts(as_of)} is after {fmt_ts(due)}"
        + (f"; reasons for the delay: {reasons}" if reasons else ""),
        "" if reasons else "[disclosure] delay_reasons",
    )


def _description(ctx: dict[str, Any]) -> str:
    m = ctx["mechanism_counts"]
    parts = []
    for key, name in (("stale", "stale reads"), ("foreign_write", "late writes")):
        c = m[key]
        if c["all"]:
            parts.append(
                f"{name}: {c['customer']:,} customer responses ({c['customer_confirmed']:,} confirmed, "
                f"{c['customer_indeterminate']:,} indeterminate), {c['all']:,} in all cohorts"
            )
    found = "; ".join(parts) or "no response attended another request's data"
    return (
        "Responses of a model-serving cluster were computed over KV-cache memory that still held other "
        f"requests' data (their prompts, in the model's internal form). Found: {found}."
    )


def form(ctx: dict[str, Any], config: BundleConfig) -> dict[str, Any]:
    """The form's sections, in the template's order, each a list of fields (label, value, missing)."""
    h, k = ctx["header"], ctx["clocks"]
    fields = {f["field"]: f for f in ctx["fields"]}
    first, last, aware = k["first_at"], k["last_at"], k["discovered_at"]
    span = f"{(last - first).total_seconds() / 86400:,.1f} days" if first and last else "none found"
    breach = "Confidentiality: unauthorised disclosure of request data to other requests' responses"
    accounts = f"{len(ctx['notifications']):,}, one notice each in notices/"
    juris = ", ".join(f"{r['jurisdiction']} ({r['accounts']:,})" for r in ctx["jurisdictions"]["rows"])
    sections: list[tuple[str, list[dict[str, str]]]] = [
        (
            "1. Type of notification",
            [
                _field("Phase (Art. 33(4))", f"{h['report_phase']}, report version {h['report_version']}"),
                _field("Replaces the notification", h["supersedes"] or "none (the first)"),
                _lateness(config, h["as_of"]),
            ],
        ),
        (
            "2. Controller, reporting person and data protection officer",
            [
                _supplied(config, "controller", "Controller (name, address)"),
                _report_field(fields, "Role (controller or processor)", "Who notifies (controller or processor)"),
                _report_field(fields, "Contact point (Art. 33(3)(b))", "Contact point (Art. 33(3)(b))"),
                _supplied(config, "dpo", "Data protection officer (Art. 37)"),
                _supplied(config, "member_states", "Member states concerned; lead authority (cross-border)"),
            ],
        ),
        (
            "3. Nature of the breach (Art. 33(3)(a))",
            [
                _field("Type", breach),
                _field("Start (first response that may be affected)", fmt_ts(first) if first else "none found"),
                _field("End (last response that may be affected)", fmt_ts(last) if last else "none found"),
                _field("Duration", span),
                _field("Awareness", fmt_ts(aware) if aware else "", "" if aware else "[incident] discovered_at"),
                _report_field(fields, "Awareness basis", "How the breach became known"),
                _field("Description", _description(ctx)),
                _report_field(fields, "Data categories", "Categories of personal data"),
                _report_field(fields, "Approximate number of records", "Approximate number of records"),
                _report_field(
                    fields, "Approximate number of data subjects", "Categories and approximate number of data subjects"
                ),
                _supplied(config, "prior_measures", "Security measures in place before the breach"),
            ],
        ),
        (
            "4. Likely consequences (Art. 33(3)(c))",
            [_report_field(fields, "Likely consequences (Art. 33(3)(c))", "Likely consequences")],
        ),
        (
            "5. Measures taken or proposed (Art. 33(3)(d))",
            [
                _report_field(
                    fields,
                    "Measures taken or proposed (Art. 33(3)(d))",
                    "To address the breach and mitigate its effects, and to prevent its recurrence",
                ),
                _report_field(fields, "Probing or exploitation searched for", "Probing or exploitation searched for"),
            ],
        ),
        (
            "6. Communication to data subjects (Art. 34)",
            [
                _field("Accounts to notify (notifications.csv)", accounts),
                _field("Their jurisdictions (report section 1)", juris or "none"),
                _supplied(config, "individuals_notified_at", "Date they were (or will be) notified"),
                _report_field(fields, "Advice to individuals (Art. 34; HIPAA 164.404(c))", "Advice given to them"),
            ],
        ),
    ]
    missing = [f for _, rows in sections for f in rows if f["missing"]]
    out = [{"title": title, "fields": rows} for title, rows in sections]
    return {"sections": out, "missing": missing, "sources": SOURCES}

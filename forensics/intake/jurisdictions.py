"""Intake, the disclosure's jurisdictions: the table of notification rules (the tool's own,
forensics/report/jurisdictions.toml, or the operator's, bundle.toml [disclosure] jurisdictions_file) and
the operator's map of accounts to jurisdictions ([disclosure] accounts_file), each read and checked once
with the rest of bundle.toml, before --out is made: a typo costs seconds, not a run.

The report stage applies them (forensics.report.jurisdictions); nothing here knows the findings.
"""

from __future__ import annotations

import csv
import hashlib
import io
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from forensics.errors import InputError

SHIPPED_RULES = Path(__file__).resolve().parent.parent / "report" / "jurisdictions.toml"
# the events a clock may run from: [incident] discovered_at, or a [disclosure] time the operator supplies
CLOCK_EVENTS = ("discovered_at", "materiality_determined_at", "individuals_notified_at")
CLOCK_UNITS = ("hours", "days", "business_days")
APPLIES = ("always", "accounts", "role=processor", "role=controller", "flag=hipaa", "flag=sec_8k", "flag=eu_ai_act")
RULE_KEYS = {
    "jurisdiction", "name", "notify", "basis", "applies", "after", "statute", "source", "read_on", "note",
    "min_residents", *CLOCK_UNITS,
}  # fmt: skip
REQUIRED = ("jurisdiction", "name", "notify", "basis", "applies", "after", "statute", "source", "read_on")


@dataclass(frozen=True)
class Rule:
    """One notification duty: who in a jurisdiction is told, by when, under which statute, as read from
    which source on which day."""

    jurisdiction: str
    name: str
    notify: str
    basis: str  # the deadline in words, as printed
    applies: str  # APPLIES
    after: str  # CLOCK_EVENTS
    statute: str
    source: str
    read_on: date
    unit: str | None = None  # CLOCK_UNITS, or None: "without undue delay", no fixed clock
    amount: int = 0
    min_residents: int | None = None  # the rule binds from this many notified residents
    note: str = ""  # where the sources disagree, and which reading is taken


@dataclass(frozen=True)
class Residence:
    """An account notified in a jurisdiction, and how many residents of it stand behind the account
    (None: not supplied; the account alone does not say)."""

    jurisdiction: str
    residents: int | None


def _rule(where: str, r: Any) -> Rule:
    if not isinstance(r, dict):
        raise InputError(f"{where}: must be a table ([[rule]])")
    unknown = sorted(set(r) - RULE_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(RULE_KEYS))})")
    missing = [k for k in REQUIRED if k not in r]
    if missing:
        raise InputError(f"{where}: lacks {', '.join(missing)}")
    for k in REQUIRED[:-1] + ("note",):
        if k in r and not (isinstance(r[k], str) and (r[k].strip() or k == "note")):
            raise InputError(f"{where}: {k} must be a non-empty string")
    if not isinstance(r["read_on"], date):
        raise InputError(f"{where}: read_on must be a TOML date (read_on = 2026-12-06), the day the source was read")
    if not r["source"].startswith(("https://", "http://")):
        raise InputError(f"{where}: source must be the URL the rule was read from")
    if r["applies"] not in APPLIES:
        raise InputError(f"{where}: applies {r['applies']!r} must be one of {', '.join(APPLIES)}")
    if r["after"] not in CLOCK_EVENTS:
        raise InputError(f"{where}: after {r['after']!r} must be one of {', '.join(CLOCK_EVENTS)}")
    units = [u for u in CLOCK_UNITS if u in r]
    if len(units) > 1:
        raise InputError(f"{where}: give one of {', '.join(CLOCK_UNITS)}, not {' and '.join(units)}")
    for k in (*units, "min_residents"):
        if k in r and (isinstance(r[k], bool) or not isinstance(r[k], int) or r[k] < 1):
            raise InputError(f"{where}: {k} must be a whole number from 1, not {r[k]!r}")
    return Rule(
        r["jurisdiction"],
        r["name"],
        r["notify"],
        r["basis"],
        r["applies"],
        r["after"],
        r["statute"],
        r["source"],
        r["read_on"],
        units[0] if units else None,
        r[units[0]] if units else 0,
        r.get("min_residents"),
        r.get("note", ""),
    )


def load_rules(path: Path) -> tuple[tuple[Rule, ...], str]:
    """The rules of a jurisdictions file, in the file's order, and the SHA-256 of its bytes as read."""
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    if set(data) - {"rule"}:
        raise InputError(f"{path}: only [[rule]] tables are known, not {sorted(set(data) - {'rule'})[0]!r}")
    rules = data.get("rule", [])
    if not isinstance(rules, list) or not rules:
        raise InputError(f"{path}: holds no [[rule]]")
    out = tuple(_rule(f"{path}: rule {i}", r) for i, r in enumerate(rules, start=1))
    names = [(r.jurisdiction, r.name) for r in out]
    if len(set(names)) < len(names):
        raise InputError(f"{path}: two rules of one jurisdiction share a name")
    return out, hashlib.sha256(raw).hexdigest()


def load_accounts(path: Path) -> tuple[dict[str, tuple[Residence, ...]], str]:
    """The operator's map of accounts to jurisdictions: a CSV with the header account_id, jurisdiction and,
    optionally, residents (how many residents of that jurisdiction the account's notice reaches; empty
    where unknown). One row per account and jurisdiction: an account in two states has two rows."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    if "account_id" not in header or "jurisdiction" not in header:
        raise InputError(f"{path}: the header must name account_id and jurisdiction (and optionally residents)")
    out: dict[str, list[Residence]] = {}
    for line, row in enumerate(reader, start=2):
        account, code = (row.get("account_id") or "").strip(), (row.get("jurisdiction") or "").strip()
        if not account or not code:
            raise InputError(f"{path}: line {line}: account_id and jurisdiction must both be given")
        n = (row.get("residents") or "").strip()
        if n and not n.isdigit():
            raise InputError(f"{path}: line {line}: residents {n!r} must be a whole number, or empty if unknown")
        seen = out.setdefault(account, [])
        if any(r.jurisdiction == code for r in seen):
            raise InputError(f"{path}: line {line}: account {account!r} is mapped to {code} twice")
        seen.append(Residence(code, int(n) if n else None))
    return {a: tuple(v) for a, v in out.items()}, hashlib.sha256(raw).hexdigest()


def disclosure_files(bundle_toml: Path, d: dict[str, Any], where: str) -> dict[str, Any]:
    """[disclosure] jurisdictions_file and accounts_file (paths relative to the bundle), read and checked:
    the rules (the shipped table where none is named), the accounts' jurisdictions (empty where none is
    named: every account's jurisdiction is then unknown) and each file's path and hash for the manifest."""
    out: dict[str, Any] = {"files": []}
    for key in ("jurisdictions_file", "accounts_file"):
        if key in d and not (isinstance(d[key], str) and d[key]):
            raise InputError(f"{where} {key} must be a file name relative to the bundle")
    rules_at = bundle_toml.parent / d["jurisdictions_file"] if "jurisdictions_file" in d else SHIPPED_RULES
    out["rules"], digest = load_rules(rules_at)
    out["rules_file"] = d.get("jurisdictions_file", "the tool's forensics/report/jurisdictions.toml")
    if "jurisdictions_file" in d:
        out["files"].append({"key": "jurisdictions_file", "path": d["jurisdictions_file"], "sha256": digest})
    out["accounts"] = {}
    if "accounts_file" in d:
        out["accounts"], digest = load_accounts(bundle_toml.parent / d["accounts_file"])
        out["files"].append({"key": "accounts_file", "path": d["accounts_file"], "sha256": digest})
    return out

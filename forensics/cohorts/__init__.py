"""Cohorts stage: label every gateway request customer / internal / researcher / other from exclusions.toml.

First cohort (file order) with a matching table wins; a table matches if all its keys match; a list
matches if any element does. Exclusion never deletes: it labels. Reads: gateway.
Writes: request_cohort (one row per gateway record, with its account), cohort_rules (one row per match
table with its counts).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.db import run_query
from forensics.errors import InputError
from forensics.intake import parse_utc, read_toml

MATCH_KEYS = {"accounts", "api_tokens", "client_cidrs", "user_agents", "headers", "models", "after", "before"}
# the tenant-layer attributes other gateway formats carry (gateway.attrs; docs/gateway-formats.md):
# match key -> the attributes it matches (a team by its id or its alias)
ATTR_KEYS = {
    "teams": ("team", "team_alias"),
    "key_aliases": ("key_alias",),
    "organizations": ("organization",),
    "users": ("user",),
    "end_users": ("end_user",),
}
MATCH_KEYS |= set(ATTR_KEYS) | {"tags"}
COHORT_KEYS = {"name", "kind", "match"}
# match keys on what any client puts in its own request (besides every header): a customer that sends
# them is labelled out of the customer cohort, and its exposures would go unreported
CLIENT_FIELDS = {"user_agents": "user_agent", "end_users": "end_user"}
UNPINNED = {"headers", "models", "after", "before"}  # keys that say nothing of who sent the request
KINDS = {"internal", "researcher", "other"}


@dataclass(frozen=True)
class Rule:
    cohort: str
    kind: str
    index: int  # 1-based position of the match table within its cohort
    keys: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.cohort}#{self.index}"

    def describe(self) -> str:
        """The match table as written: `accounts=a, b; headers.x-test=1; client_cidrs=192.0.2.77/32`."""
        parts: list[str] = []
        for k, v in sorted(self.keys.items()):
            if k == "headers":
                parts.extend(f"headers.{h}={', '.join(vals)}" for h, vals in sorted(v.items()))
            elif isinstance(v, datetime):
                parts.append(f"{k}={v.isoformat()}")
            else:
                parts.append(f"{k}={', '.join(str(x) for x in v)}")
        return "; ".join(parts)

    def client_fields(self) -> list[str]:
        """The fields the client itself sends that this rule matches on (`headers.<name>`, `user_agent`,
        `end_user`), when they are all that says who sent the request: none when the rule also names
        an account, a token, a network or a tenant (then no stranger matches it by sending a header)."""
        if any(k not in CLIENT_FIELDS and k not in UNPINNED for k in self.keys):
            return []
        fields = [f"headers.{h}" for h in sorted(self.keys.get("headers", {}))]
        fields += [CLIENT_FIELDS[k] for k in sorted(self.keys) if k in CLIENT_FIELDS]
        return fields


def _strings(value: Any, where: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(x, str) and x for x in items):
        raise InputError(f"{where}: expected a string or a list of non-empty strings, got {value!r}")
    return list(items)


def _parse_match(table: Any, where: str) -> dict[str, Any]:
    if not isinstance(table, dict) or not table:
        raise InputError(f"{where}: a [[cohort.match]] table needs at least one key ({', '.join(sorted(MATCH_KEYS))})")
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in MATCH_KEYS:
            raise InputError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(MATCH_KEYS))})")
        if key in ("after", "before"):
            out[key] = parse_utc(value, f"{where}: {key}")
        elif key == "headers":
            if not isinstance(value, dict) or not value:
                raise InputError(f"{where}: headers must be a table of header = value")
            hdrs = {}
            for h, v in value.items():
                if '"' in h or "\\" in h:
                    raise InputError(f"{where}: header name {h!r} may not contain quotes or backslashes")
                hdrs[h] = _strings(v, f"{where}: headers.{h}")
            out[key] = hdrs
        elif key == "client_cidrs":
            nets = []
            for c in _strings(value, f"{where}: client_cidrs"):
                try:
                    nets.append(ipaddress.ip_network(c, strict=False))
                except ValueError:
                    raise InputError(
                        f"{where}: client_cidrs: {c!r} is not an IP network (e.g. 198.51.100.0/24)"
                    ) from None
            out[key] = nets
        else:
            out[key] = _strings(value, f"{where}: {key}")
    return out


def exclusions_file(bundle: Path, override: Path | None = None) -> Path | None:
    """The exclusion rules a run uses: the file named on the command line (which must exist), else
    the bundle's own exclusions.toml if it has one, else none (every request is customer)."""
    if override is not None:
        if not override.is_file():
            raise InputError(f"{override}: no such exclusions file")
        return override
    own = bundle / "exclusions.toml"
    return own if own.is_file() else None


def exclusion_rules(bundle: Path, override: Path | None = None) -> tuple[Path | None, list[Rule]]:
    """The exclusions file a run uses (exclusions_file) and its rules; none: every request is customer."""
    path = exclusions_file(bundle, override)
    return path, load_exclusions(path) if path else []


def load_exclusions(path: Path) -> list[Rule]:
    data = read_toml(path)
    for key in data:
        if key != "cohort":
            raise InputError(f"{path}: unknown top-level key {key!r} (expected [[cohort]] tables)")
    cohorts = data.get("cohort", [])
    if not isinstance(cohorts, list):
        raise InputError(f"{path}: 'cohort' must be an array of tables ([[cohort]])")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, c in enumerate(cohorts, start=1):
        where = f"{path}: cohort {i}"
        if not isinstance(c, dict):
            raise InputError(f"{where}: must be a table")
        for key in c:
            if key not in COHORT_KEYS:
                raise InputError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(COHORT_KEYS))})")
        name, kind = c.get("name"), c.get("kind")
        if not isinstance(name, str) or not name or name == "customer":
            raise InputError(f"{where}: name must be a non-empty string other than 'customer'")
        if name in seen:
            raise InputError(f"{where}: cohort name {name!r} used twice")
        seen.add(name)
        if kind not in KINDS:
            raise InputError(f"{where} ({name}): kind must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
        matches = c.get("match", [])
        if not isinstance(matches, list) or not matches:
            raise InputError(f"{where} ({name}): needs at least one [[cohort.match]] table")
        for j, m in enumerate(matches, start=1):
            rules.append(Rule(name, kind, j, _parse_match(m, f"{where} ({name}) match {j}")))
    return rules


def _predicate(rule: Rule, rule_id: int, params: list[Any]) -> str:
    parts = []
    for key, value in sorted(rule.keys.items()):
        if key in ("accounts", "api_tokens", "models"):
            col = {"accounts": "account_id", "api_tokens": "api_token_id", "models": "model"}[key]
            parts.append(f"list_contains(?::VARCHAR[], {col})")
            params.append(value)
        elif key in ATTR_KEYS:
            parts.append(
                "("
                + " OR ".join("list_contains(?::VARCHAR[], json_extract_string(attrs, ?))" for _ in ATTR_KEYS[key])
                + ")"
            )
            for attr in ATTR_KEYS[key]:
                params.extend([value, f"$.{attr}"])
        elif key == "tags":  # any tag of the record among the rule's
            parts.append(
                "CASE WHEN json_type(attrs, '$.tags') = 'ARRAY' THEN len(list_intersect(?::VARCHAR[], "
                "CAST(json_extract(attrs, '$.tags') AS VARCHAR[]))) > 0 END"
            )
            params.append(value)
        elif key == "user_agents":
            parts.append("(" + " OR ".join("coalesce(user_agent GLOB ?, false)" for _ in value) + ")")
            params.extend(value)
        elif key == "headers":
            for h, vals in sorted(value.items()):
                parts.append("list_contains(?::VARCHAR[], json_extract_string(headers, ?))")
                params.extend([vals, f'$."{h}"'])
        elif key == "client_cidrs":
            parts.append("client_ip IN (SELECT client_ip FROM cidr_hits WHERE rule_id = ?)")
            params.append(rule_id)
        elif key == "after":
            parts.append("ts >= ?")
            params.append(value)
        elif key == "before":
            parts.append("ts < ?")
            params.append(value)
    return "coalesce(" + " AND ".join(parts) + ", false)"


def _cidr_hits(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE cidr_hits (rule_id INTEGER, client_ip VARCHAR)")
    if not any("client_cidrs" in r.keys for r in rules):
        return
    ips = [r[0] for r in con.execute("SELECT DISTINCT client_ip FROM gateway WHERE client_ip IS NOT NULL").fetchall()]
    parsed = []
    for ip in ips:
        try:
            parsed.append((ip, ipaddress.ip_address(ip.strip())))
        except ValueError:
            continue  # not an address: matches no CIDR
    hits = [
        (i, ip)
        for i, r in enumerate(rules)
        if "client_cidrs" in r.keys
        for ip, addr in parsed
        if any(addr in net for net in r.keys["client_cidrs"])
    ]
    if hits:
        con.executemany("INSERT INTO cidr_hits VALUES (?, ?)", hits)


def assign_cohorts(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> None:
    _cidr_hits(con, rules)
    params: list[Any] = []
    preds = [_predicate(r, i, params) for i, r in enumerate(rules)]
    # rule_hits: the records some rule matches (usually few), with the ids of the rules that match each, in order
    hit_cols = "".join(f", {p} AS m{i}" for i, p in enumerate(preds))
    any_hit = " OR ".join(f"m{i}" for i in range(len(rules))) or "false"
    ids = ", ".join(f"CASE WHEN m{i} THEN {i} END" for i in range(len(rules)))
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE rule_hits AS SELECT file_id, row,
            list_filter([{ids}], lambda x: x IS NOT NULL)::INTEGER[] AS rules
            FROM (SELECT file_id, row{hit_cols} FROM gateway) WHERE {any_hit}""",
        params,
    )
    con.execute(
        "CREATE OR REPLACE TABLE rule_defs (rule_id INTEGER, cohort VARCHAR, kind VARCHAR, label VARCHAR, "
        "match VARCHAR)"
    )
    if rules:
        con.executemany(
            "INSERT INTO rule_defs VALUES (?, ?, ?, ?, ?)",
            [(i, r.cohort, r.kind, r.label, r.describe()) for i, r in enumerate(rules)],
        )
    run_query(con, "cohorts", "request_cohort")
    run_query(con, "cohorts", "cohort_rules")  # ends rule_hits

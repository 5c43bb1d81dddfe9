"""What each exclusion rule matches, before the analysis: per cohort and per rule the requests
matched and won (first match wins), with a few sample request ids per rule; and the warnings on rules
that match client-controlled fields alone, for the preview and for investigate (store_warnings).
Reads: gateway. Writes: request_cohort and rule_hits of the connection it is given (scratch), and for
investigate the temp table cohort_warnings."""

from __future__ import annotations

from typing import Any

import duckdb

from forensics.cohorts import Rule, assign_cohorts
from forensics.db import query_rows

SAMPLES = 5  # request ids shown per rule


def preview(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> dict[str, Any]:
    """Counts per cohort (`cohorts`) and per rule (`rules`, with `sample_matched` and `sample_won`)."""
    samples = {}
    _otherwise_customer(con, rules)
    for rule in rules:  # one rule alone: every request it matches, won or not
        assign_cohorts(con, [rule])
        samples[rule.label] = [r["request_id"] for r in query_rows(con, "cohorts", "preview_samples", n=SAMPLES)]
    assign_cohorts(con, rules)
    cohorts = query_rows(con, "cohorts", "preview_counts")
    rule_rows = query_rows(con, "cohorts", "preview_rules")
    for r in rule_rows:
        won = query_rows(con, "cohorts", "preview_won", label=r["label"], n=SAMPLES)
        r["sample_matched"], r["sample_won"] = samples.get(r["label"], []), [x["request_id"] for x in won]
    return {"cohorts": cohorts, "rules": rule_rows, "warnings": client_field_warnings(con, rules)}


def _otherwise_customer(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> None:
    """otherwise_customer: the requests that would be customer if no rule matched on client-controlled
    fields alone (request_cohort is then reassigned by whoever calls)."""
    assign_cohorts(con, [r for r in rules if not r.client_fields()])
    con.execute(
        "CREATE OR REPLACE TEMP TABLE otherwise_customer AS "
        "SELECT file_id, row FROM request_cohort WHERE cohort = 'customer'"
    )


def store_warnings(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> list[str]:
    """investigate's cohort warnings (client_field_warnings), after assign_cohorts(con, rules): their
    messages, also kept in the temp table cohort_warnings (rule, message) for the report. Reassigns the
    same rules at the end, so request_cohort and cohort_rules are what assign_cohorts made."""
    con.execute("CREATE OR REPLACE TEMP TABLE cohort_warnings (rule VARCHAR, message VARCHAR)")
    if not any(r.client_fields() for r in rules):
        return []
    _otherwise_customer(con, rules)
    assign_cohorts(con, rules)
    warnings = client_field_warnings(con, rules)
    if warnings:
        con.executemany("INSERT INTO cohort_warnings VALUES (?, ?)", [(w["rule"], w["message"]) for w in warnings])
    return [w["message"] for w in warnings]


def client_field_warnings(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> list[dict[str, Any]]:
    """One warning per rule on client-controlled fields alone (a header, the user agent, the end user)
    that took requests that are otherwise customer out of the customer cohort: any client can send
    those fields, so the rule may hide a customer's exposures. Needs request_cohort of all `rules` and
    otherwise_customer (preview)."""
    moved = {r["rule"]: r for r in query_rows(con, "cohorts", "preview_otherwise_customer")}
    warnings = []
    for rule in rules:
        fields, hit = rule.client_fields(), moved.get(rule.label)
        if not fields or hit is None:
            continue
        # a request whose gateway record names no account (a dropped column) is shown as such, not skipped
        shown = [a if a is not None else "(no account)" for a in hit["sample_accounts"]]
        warnings.append(
            {
                "rule": rule.label,
                "fields": fields,
                "requests": hit["requests"],
                "accounts": hit["accounts"],
                "sample_accounts": shown,
                "message": (
                    f"rule {rule.label} matches {' and '.join(fields)}, which any client can send: it moved "
                    f"{hit['requests']:,} requests of {hit['accounts']:,} account(s) that no other rule names "
                    f"({', '.join(shown)}{', ...' if hit['accounts'] > 5 else ''}) out of the "
                    "customer cohort (their exposures are not reported as customer ones)"
                ),
            }
        )
    return warnings

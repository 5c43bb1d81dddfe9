"""What each exclusion rule matches, before the analysis: per cohort and per rule the requests
matched and won (first match wins), with a few sample request ids per rule.
Reads: gateway. Writes: request_cohort and rule_hits of the connection it is given (scratch)."""

from __future__ import annotations

from typing import Any

import duckdb

from forensics.cohorts import Rule, assign_cohorts
from forensics.db import query_rows

SAMPLES = 5  # request ids shown per rule


def preview(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> dict[str, Any]:
    """Counts per cohort (`cohorts`) and per rule (`rules`, with `sample_matched` and `sample_won`)."""
    samples = {}
    for rule in rules:  # one rule alone: every request it matches, won or not
        assign_cohorts(con, [rule])
        samples[rule.label] = [r["request_id"] for r in query_rows(con, "cohorts", "preview_samples", n=SAMPLES)]
    assign_cohorts(con, rules)
    cohorts = query_rows(con, "cohorts", "preview_counts")
    rule_rows = query_rows(con, "cohorts", "preview_rules")
    for r in rule_rows:
        won = query_rows(con, "cohorts", "preview_won", label=r["label"], n=SAMPLES)
        r["sample_matched"], r["sample_won"] = samples.get(r["label"], []), [x["request_id"] for x in won]
    return {"cohorts": cohorts, "rules": rule_rows}

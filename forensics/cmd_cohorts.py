"""`forensics cohorts`: preview what each exclusion rule matches, without running the analysis.

Loads only the bundle's gateway log into an in-memory DuckDB, labels it with forensics.cohorts, and
reports per cohort and per rule (match table) the requests matched and won (first match wins),
with up to five sample request ids per rule. Reads: gateway. Writes: nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from forensics.app import app

SAMPLES = 5
EXCL_HELP = "exclusions.toml overriding the bundle's."


def preview(bundle: Path, exclusions: Path | None = None) -> dict[str, Any]:
    """Counts per cohort and per rule, before and after exclusion; plain data."""
    from forensics.bundle import discover
    from forensics.cohorts import assign_cohorts, load_exclusions
    from forensics.db import connect, run_query
    from forensics.errors import InputError
    from forensics.ingest.gateway import define_gateway, load_gateway_file
    from forensics.ingest.staged import InPlace
    from forensics.report.data import rows

    excl = exclusions or bundle / "exclusions.toml"
    rules = load_exclusions(excl) if excl.is_file() else []
    if exclusions is not None and not exclusions.is_file():
        raise InputError(f"{exclusions}: no such exclusions file")
    gateway = [f for f in discover(bundle) if f.source == "gateway" and not f.error]
    if not gateway:
        raise InputError(f"{bundle}: no readable gateway log (gateway/*.jsonl, *.csv, *.parquet, ...)")
    con = connect(":memory:")
    try:
        run_query(con, "ingest", "schema")
        in_place = InPlace()
        for f in gateway:
            load_gateway_file(con, f, in_place)
        define_gateway(con, in_place)
        samples = {}
        for rule in rules:  # one rule alone: every request it matches, won or not
            assign_cohorts(con, [rule])
            samples[rule.label] = [r["request_id"] for r in rows(con, "cohort_preview_samples", n=SAMPLES)]
        assign_cohorts(con, rules)
        cohorts = rows(con, "cohort_preview_counts")
        rule_rows = rows(con, "cohort_preview_rules")
        won = {
            r["label"]: [x["request_id"] for x in rows(con, "cohort_preview_won", label=r["label"], n=SAMPLES)]
            for r in rule_rows
        }
    finally:
        con.close()
    for r in rule_rows:
        r["sample_matched"], r["sample_won"] = samples.get(r["label"], []), won[r["label"]]
    total = sum(c["requests"] for c in cohorts)
    customer = sum(c["requests"] for c in cohorts if c["cohort"] == "customer")
    return {
        "bundle": str(bundle),
        "exclusions": str(excl) if excl.is_file() else None,
        "requests_before": total,
        "requests_after": customer,
        "cohorts": cohorts,
        "rules": rule_rows,
        "rows_rejected": sum(f.rows_rejected for f in gateway),
    }


def _clean(text: Any) -> str:
    """Request ids come from logs: no control characters (terminal escapes) reach the terminal."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def as_text(p: dict[str, Any]) -> str:
    lines = [
        f"Exclusions: {p['exclusions'] or 'none (every request is customer)'}",
        f"Requests: {p['requests_before']:,} before exclusion, {p['requests_after']:,} customer after"
        f" ({p['rows_rejected']:,} gateway rows rejected at load)",
        "",
        f"{'cohort':24} {'kind':11} {'requests':>10} {'accounts':>9}",
    ]
    lines += [f"{_clean(c['cohort']):24} {c['kind']:11} {c['requests']:>10,} {c['accounts']:>9,}" for c in p["cohorts"]]
    if p["rules"]:
        lines += ["", f"{'rule':28} {'matched':>9} {'won':>9}  match / sample request ids"]
        for r in p["rules"]:
            lines.append(f"{_clean(r['label']):28} {r['matched']:>9,} {r['won']:>9,}  {_clean(r['match'])}")
            lines.append(f"{'':28} {'':>9} {'':>9}  matched: {_clean(', '.join(r['sample_matched'])) or '-'}")
            lines.append(f"{'':28} {'':>9} {'':>9}  won:     {_clean(', '.join(r['sample_won'])) or '-'}")
    return "\n".join(lines)


@app.command("cohorts")
def cohorts(
    bundle: Annotated[Path, typer.Argument(help="Evidence bundle folder (only its gateway log is read).")],
    exclusions: Annotated[Path | None, typer.Option("--exclusions", help=EXCL_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Preview what each exclusion rule matches (counts and sample request ids), without the analysis."""
    result = preview(bundle, exclusions)
    typer.echo(json.dumps(result, indent=2, sort_keys=True) if as_json else as_text(result))

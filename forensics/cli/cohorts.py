"""`forensics cohorts`: preview what each exclusion rule matches, without running the analysis.

The job is forensics.pipeline.preview_cohorts: per cohort and per rule the requests matched and won
(first match wins), with up to five sample request ids per rule. Writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from forensics.cli.app import app

EXCL_HELP = "exclusions.toml overriding the bundle's."


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
    from forensics.pipeline import preview_cohorts

    result = preview_cohorts(bundle, exclusions)
    for w in result["warnings"]:  # on stderr also with --json, where they are in the object too
        typer.echo(f"Warning: {_clean(w['message'])}", err=True)
    typer.echo(json.dumps(result, indent=2, sort_keys=True) if as_json else as_text(result))

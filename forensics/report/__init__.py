"""Report stage: the disclosure report (report.html, report.md) and the blast-radius files.

Reads the findings stage's tables (see forensics.report.data); writes report.html, report.md,
brief.html, edpb_art33.html and .md (the GDPR Art. 33 form), through forensics.report.blast
notifications.csv and blast_*.csv, and through
forensics.report.notices the per-account notices (notices/) into the output folder.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.cohorts import Rule
from forensics.db import Step, run_steps
from forensics.intake import BundleConfig, InputFile
from forensics.report.evidence import EVIDENCE_REFS
from forensics.report.provenance import PROVENANCE_LIMIT

# the report's tables, in data order (forensics/report/queries/); its other queries are the templates'
# SELECTs (forensics.report.data), and notice_incident stores the context the report was rendered from
REPORT_STEPS: tuple[Step, ...] = (
    "report_affected",  # the responses the report counts, with their accounts and cohorts
    "notice_requests",  # what notifications.csv counts and the notices list
    ("finding_evidence", {"refs": EVIDENCE_REFS}),  # each findings row's id and evidence lines: the notices cite them
    "blast_sources",  # report_sources: blast_sources.csv, and the report's first rows and count
    ("prov_recipients", {"prov_limit": PROVENANCE_LIMIT}),  # the recipients part 2 shows the provenance of
    "prov_stale",  # ... their stale reads, with the events that explain each
    "prov_foreign",  # ... their foreign writes
    "prov_ranges",  # ... both merged into slot ranges
)


def render_report(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    *,
    config: BundleConfig,
    files: list[InputFile],
    rules: list[Rule],
    as_of: datetime | None = None,
    notice_templates: list[Path] | None = None,
    **_: Any,
) -> dict[str, int]:
    """Write the report and the blast-radius CSVs; returns rows written per CSV. Deterministic:
    no wall-clock time unless `as_of` is given."""
    from forensics.report.blast import write_blast_files
    from forensics.report.data import gather
    from forensics.report.edpb import form as edpb_form
    from forensics.report.notices import store_incident, write_notices
    from forensics.report.render import render

    run_steps(con, "report", REPORT_STEPS)
    counts = write_blast_files(con, out)
    ctx = gather(con, config=config, files=files, rules=rules, as_of=as_of)
    ctx["blast_files"] = counts
    ctx["edpb"] = edpb_form(ctx, config)
    render(ctx, out)
    store_incident(con, ctx, config.disclosure)
    counts.update(write_notices(con, out, notice_templates))
    return counts

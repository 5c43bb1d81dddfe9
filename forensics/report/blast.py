"""Blast radius files: who received others' data and whose data was exposed, to whom.

Reads: report_affected, notice_requests, report_sources (made by the report's steps), exposures, coverage.
Writes: notifications.csv (one row per customer account to notify, both directions), blast_matrix.csv
(recipient cohort x source cohort), blast_nodes.csv, blast_hours.csv, blast_sources.csv, and
shared_prefix.csv (cross-account prefix-cache sharing: a timing side channel, not a leak). CSV cells go
through forensics.outputs.write_csv: neutralized against formula injection, owner-only file mode.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from forensics.db import bound
from forensics.outputs import write_csv
from forensics.paths import load_query

BLAST_FILES = {
    "notifications.csv": "notifications",
    "blast_matrix.csv": "exposure_matrix",
    "blast_nodes.csv": "blast_nodes",
    "blast_hours.csv": "blast_hours",
    "blast_sources.csv": "blast_sources_csv",  # the table report_sources, made by blast_sources.sql
    "shared_prefix.csv": "shared_prefix",
}


def write_blast_files(con: duckdb.DuckDBPyConnection, out: Path) -> dict[str, int]:
    """The blast-radius CSVs, from the tables of the report's steps (forensics.report.REPORT_STEPS)."""
    return {
        name: write_csv(con, sql, out / name, bound(sql, {"bucket": "hour"}))  # blast_hours.csv: by the hour
        for name, sql in ((name, load_query("report", query)) for name, query in BLAST_FILES.items())
    }

"""Report stage, the findings rows behind each notice line: finding_evidence (its query) gives every row of
affected_responses and exposures a stable id and the evidence lines (bundle file:line) it rests on; a
notice cites, for each request it lists, the ids of the rows behind it, so an auditor walks from a
sentence to its finding (evidence.csv of `forensics pack`, or the table in incident.duckdb) and on to the
log lines.

A received response is one affected_responses row; an exposed request is the exposures rows whose source
it is. A possibly exposed request rests on the possible pairs (possible_sources, a view too large to
itemise per notice): its line cites none, and the notice says where they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import duckdb

from forensics.outputs import write_csv
from forensics.paths import load_query

EVIDENCE_REFS = 12  # evidence lines listed per finding (evidence_count says how many there are)
EVIDENCE_CSV = "evidence.csv"
# what a notice line of each role cites: the findings file and the column that names the notice's request
CITES = {"received": ("affected_responses.csv", "request_id"), "exposed": ("exposures.csv", "source_request_id")}

Cited = dict[tuple[str, str], list[str]]  # (role, request id) -> the finding ids behind that notice line


def has_evidence(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database holds finding_evidence (made by a version that cites findings)."""
    row = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'finding_evidence'").fetchone()
    return bool(row and row[0])


def cited_ids(con: duckdb.DuckDBPyConnection, only: Collection[str] | None = None) -> Cited:
    """Per notice line (role, request id), the ids of its findings rows, in id order; only for the requests
    the notices list (notice_requests), or with `only` the requests of those accounts' notices. Empty for
    a database without finding_evidence."""
    if not has_evidence(con):
        return {}
    out: Cited = defaultdict(list)
    chosen = {"every": only is None, "only": sorted(only or ())}
    query = load_query("report", "cited_ids")
    for role, (file, column) in CITES.items():
        rows = con.execute(query, {"role": role, "file": file, "column": column, **chosen}).fetchall()
        for request_id, finding_id in rows:
            out[(role, request_id)].append(finding_id)
    return dict(out)


def write_evidence(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """evidence.csv: finding_evidence as written (one row per findings row, in its order)."""
    return write_csv(
        con,
        "SELECT * FROM finding_evidence ORDER BY finding_file, request_id, source_request_id, node, kind, finding_id",
        path,
    )

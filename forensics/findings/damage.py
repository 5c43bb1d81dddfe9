"""Evidence damage as a finding: every loss the evidence shows, one row per damaged input (or per loss
of one), in `evidence_damage` (evidence_damage.csv). Each kind of damage is one query of
findings/queries/, a SELECT of the same columns; DAMAGE_KINDS lists them and the step unions them, so
a new kind is one more query and one more entry. The command line, --json, the manifest and part 1 of
the report all read the table, each line made by damage_line.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import duckdb

from forensics.db import rows_of, run_query, timed
from forensics.paths import load_query

# one query per kind of damage, each a SELECT of COLUMNS
DAMAGE_KINDS = (
    "damage_inputs",  # files skipped whole, page files cut or unreadable (ingest's input_damage)
    "damage_stream_cut",  # compressed streams cut short, with the records they lost estimated
    "damage_seq_gaps",  # page events lost in a node's seq gaps
    "damage_rejected",  # rows rejected, per file
    "damage_outages",  # a node's logs silent while the gateway routed it requests (log_outages)
    "damage_duplicates",  # lines delivered twice or out of order, per file (ingest's input_duplicates)
    "damage_gateway_gap",  # rooms the engines served without a gateway record: a gateway file missing or cut
)
# What makes rooms without a gateway record a gap (damage_gateway_gap.sql): a run of at least 12 such
# rooms in the order they finished, at most 2 recorded rooms between two of them (ends of requests served
# at once are ordered differently by the gateway and the engines), 90% or more of the rooms served in its
# time (a quarter of the records missing all along, as one of four files side by side, makes runs of 8 at
# 80% by chance on the sample); outside the runs, 12 or more spread over the time, 5% or more of the rooms
# served there. Undamaged simulated bundles of every gateway format, and the sample, have no room without
# a record; a single one is no gap.
GAP_PARAMS = {"gap_tolerance": 2, "gap_min_rooms": 12, "gap_share": 0.9, "gap_spread_share": 0.05}
COLUMNS = ("input", "source", "node", "kind", "detail", "records_lost", "lost_basis", "time_from", "time_to")


def _select(name: str) -> str:
    # the file's header comments end at a line break: the closing parenthesis goes on its own line
    return f"SELECT {', '.join(COLUMNS)} FROM (\n{load_query('findings', name).strip().rstrip(';')}\n)"


def evidence_damage(con: duckdb.DuckDBPyConnection) -> None:
    """evidence_damage: the union of DAMAGE_KINDS' rows, in a total order."""
    run_query(con, "findings", "damage_node_files")  # read by two kinds: made once
    with timed("findings/evidence_damage"):
        con.execute(
            "CREATE OR REPLACE TABLE evidence_damage AS SELECT * FROM ("
            + "\nUNION ALL\n".join(_select(q) for q in DAMAGE_KINDS)
            + ") ORDER BY input, kind, time_from NULLS FIRST, detail",
            GAP_PARAMS,
        )


def damage_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """evidence_damage's rows as dicts, in its order (times as ISO 8601 text in UTC, for JSON)."""
    rows = rows_of(con, "SELECT * FROM evidence_damage ORDER BY input, kind, time_from NULLS FIRST, detail")
    for r in rows:
        for c in ("time_from", "time_to"):
            if r[c] is not None:
                r[c] = r[c].astimezone(UTC).isoformat().replace("+00:00", "Z")
    return rows


def lost_phrase(records_lost: int | None, lost_basis: str) -> str:
    """How many records a loss cost, as known: counted, estimated (said so), or unknown (never 0)."""
    if records_lost is None:
        return "records lost: unknown"
    if lost_basis == "estimated":
        return f"about {records_lost:,} records lost (estimated)"
    return f"{records_lost:,} records lost"


def damage_line(row: dict[str, Any]) -> str:
    """One line of the command line's summary for one row of evidence_damage."""
    return f"DAMAGED {row['input']}: {row['detail']} ({lost_phrase(row['records_lost'], row['lost_basis'])})"

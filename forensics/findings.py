"""Findings stage: exposures, affected responses, hazards, accounts, coverage; and their CSV files.

Reads: the ownership stage's tables, gateway, request_cohort, engine_requests, node_config.
Writes: node_rooms, read_provenance, write_effects, exposure_segments, room_flags, room_requests,
signature_responses, missing_rooms, exposures, affected_responses, hazard_segments, hazards,
accounts, coverage; and the findings CSV files.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from forensics.db import run_steps
from forensics.outputs import write_csv
from forensics.paths import load_query


def node_rooms(con: duckdb.DuckDBPyConnection) -> None:
    """node_rooms (node, room, own): each node's rooms, one aggregate per node (queries/findings/node_rooms.sql);
    node_missing (node, file_id, row): the served requests routed to it that it logged nothing of its own
    for (queries/findings/node_missing.sql)."""
    # temp: a lookup for the next two steps (derived from page_events; 18M rows at 100M events)
    con.execute("CREATE OR REPLACE TEMP TABLE node_rooms (node VARCHAR, room BIGINT, own BOOLEAN)")
    con.execute("CREATE OR REPLACE TEMP TABLE node_missing (node VARCHAR, file_id INTEGER, row BIGINT)")
    rooms, missing = load_query("findings", "node_rooms"), load_query("findings", "node_missing")
    for (node,) in con.execute("SELECT node FROM telemetry_nodes ORDER BY node").fetchall():
        con.execute(rooms, {"node": node})
        con.execute(missing, {"node": node})


STEPS = (
    "gap_rooms",
    "read_provenance",
    "write_effects",
    "exposure_segments",
    "room_flags",
    node_rooms,
    "room_requests",
    "signature_responses",
    "missing_rooms",
    "exposures",
    "affected_responses",
    "hazards",
    "coverage",
    "accounts",
)

OUTPUTS = {
    "affected_responses.csv": """SELECT request_id, account_id, cohort, status, evidence, kinds, first_exposed_at,
        exposed_slots, source_requests, http_status, completion_tokens, decode_node, prefill_node, room, reason
        FROM affected_responses ORDER BY ALL""",  # by request_id (a repeated one: by every column)
    "exposures.csv": """SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id,
        node, kind, slots, status, first_exposed_at, recipient_cohort, source_cohort, recipient_room, source_room
        FROM exposures ORDER BY recipient_request_id, source_request_id, node, kind, recipient_room, source_room,
        recipient_account_id, source_account_id, recipient_cohort, source_cohort, slots, status, first_exposed_at""",
    "accounts.csv": """SELECT account_id, cohort, responses_affected, requests_exposed, responses_confirmed,
        responses_indeterminate, requests_exposed_confirmed FROM accounts ORDER BY account_id""",
    "hazards.csv": "SELECT node, room, kind, slots, detail FROM hazards ORDER BY node, room, kind",
    "coverage.csv": """SELECT node, role, page_telemetry, seq_gaps, responses_served, responses_verified,
        events_lost, page_events FROM coverage ORDER BY node""",
    "rejected.csv": """SELECT f.path AS file, r.row, r.reason FROM rejected r JOIN files f USING (file_id)
        ORDER BY f.path, r.row NULLS FIRST, r.reason""",
}


def compute_findings(con: duckdb.DuckDBPyConnection) -> None:
    run_steps(con, "findings", STEPS)


def write_findings(con: duckdb.DuckDBPyConnection, out: Path) -> dict[str, int]:
    return {name: write_csv(con, query, out / name) for name, query in OUTPUTS.items()}

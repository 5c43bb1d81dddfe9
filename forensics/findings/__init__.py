"""Findings stage: exposures, affected responses, hazards, accounts, coverage; and their CSV files.

Reads: the ownership stage's tables, gateway, request_cohort, engine_requests, node_config.
Writes: node_missing, read_provenance, order_alternatives, conflict_rooms, write_effects, exposure_segments,
exposure_certain (temp), room_flags, log_outages, outage_responses, room_requests, signature_responses,
late_write_rule (temp), late_write_responses, missing_rooms, exposures, recipient_slots (temp),
integrity_responses, affected_responses, tier_cases, tier_reliability, gap_sources, sender_sources, possible_sources,
content_matches, content_pairs (view), hazard_segments, hazards, accounts, coverage, evidence_damage; and
the findings CSV files.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from forensics.contract import POSSIBLE_PAIRS_LIMIT
from forensics.db import arrow_view, query_rows, run_query, run_steps, telemetry_node_names
from forensics.findings.damage import evidence_damage
from forensics.findings.gap_sources import gap_sources
from forensics.findings.likelihood import source_likelihood
from forensics.findings.possible import possible_reach
from forensics.findings.rules import define_rules
from forensics.findings.sender_sources import sender_sources
from forensics.ingest.gateway import GATEWAY_SLACK_US
from forensics.outputs import write_csv
from forensics.ownership import release_scratch
from forensics.ownership.kernels.envelope import envelope
from forensics.paths import load_query


def node_missing(con: duckdb.DuckDBPyConnection) -> None:
    """node_missing (node, file_id, row): the served requests routed to a node that it logged nothing of
    its own for (findings/queries/node_missing.sql, one node at a time)."""
    con.execute("CREATE OR REPLACE TEMP TABLE node_missing (node VARCHAR, file_id INTEGER, row BIGINT)")
    missing = load_query("findings", "node_missing")
    for node in telemetry_node_names(con):
        con.execute(missing, {"node": node})


def order_alternatives(con: duckdb.DuckDBPyConnection) -> None:
    """order_alternatives (findings/queries/order_alternatives.sql): the other last writers the evidence
    allows where a landing is ambiguous. What each ambiguous landing overwrote is the last writer of
    every piece of its slots among the earlier writes into them (prestate_candidates.sql), resolved by
    the same envelope as the last-writer search (forensics.ownership.kernels.envelope): prestate_runs (item, s, e, w_k,
    w_room)."""
    run_query(con, "findings", "ambiguous_landings")
    run_query(con, "findings", "prestate_candidates")
    o = con.execute('SELECT item, start, "end" FROM ambiguous_landings ORDER BY item').fetchnumpy()
    c = con.execute("SELECT item, cs, ce, k FROM prestate_candidates").fetchnumpy()
    col = {**{f"o_{n}": v for n, v in o.items()}, **{f"c_{n}": v for n, v in c.items()}}
    i64 = {n: np.asarray(v, dtype=np.int64) for n, v in col.items()}
    if i64["o_item"].size:
        env = envelope(*(i64[n] for n in ("o_item", "o_start", "o_end", "c_item", "c_cs", "c_ce", "c_k")))
        runs = pa.table({"item": env.item, "s": env.s, "e": env.e, "w_k": env.k})
    else:  # no ambiguous landing
        runs = pa.table({n: np.empty(0, dtype=np.int64) for n in ("item", "s", "e", "w_k")})
    with arrow_view(con, "prestate_env", runs):
        con.execute(load_query("findings", "prestate_runs"))
    run_query(con, "findings", "order_alternatives")  # drops its scratch: the landings, candidates and runs


def recipient_slots(con: duckdb.DuckDBPyConnection) -> None:
    """recipient_slots (node, recipient_room, slots): the distinct slots each recipient attended others'
    data in, the length of the union of its exposure_segments ranges on the node (what
    findings/queries/recipient_slots.sql defines with a window). Here: one sort of the ranges by
    (recipient, start) packed into one integer key, then a running maximum of the ends; a range counts
    what lies beyond the furthest end before it. The query runs instead when a slot position or the
    number of recipients does not fit the packed key, or a value is NULL."""
    # nodes by their number in node_index (base = number << 40, numbered from 1)
    t = con.execute("""SELECT node_number(x.base) AS nid, e.recipient_room AS room, e.seg_start AS s, e.seg_end AS e
        FROM exposure_segments e LEFT JOIN node_index x USING (node)""").fetchnumpy()
    nulls = any(np.ma.is_masked(v) for v in t.values())  # none by construction (else: the query)
    # in place where it can be: fresh memory is what this step costs most on some VMs
    nid, start, end = (np.asarray(t[c], dtype=np.int64) for c in ("nid", "s", "e"))
    rooms, key = np.unique(np.asarray(t.pop("room"), dtype=np.int64), return_inverse=True)
    n = max(len(rooms), 1)
    if nulls or len(start) and (start.min() < 0 or end.max() >= 1 << 32 or (int(nid.max()) + 1) * n >= 1 << 31):
        run_query(con, "findings", "recipient_slots")
        return
    key = key.astype(np.int64, copy=False).reshape(-1)
    key += nid * n  # recipient (node, room) as one id, then its ranges by start in one sortable key
    key <<= 32
    key |= start
    del nid, start, t
    order = np.argsort(key, kind="stable")
    key, end = key[order], end[order]
    del order
    reach = key >> 32  # the recipient of each range, then (recipient << 32 | end) running maximum:
    first = np.ones(len(key), dtype=bool)  # a recipient's keys exceed every earlier recipient's
    first[1:] = reach[1:] != reach[:-1]
    heads = np.flatnonzero(first)
    ids = reach[heads]
    reach <<= 32
    reach |= end
    np.maximum.accumulate(reach, out=reach)
    start = key & 0xFFFFFFFF
    del key
    before = np.zeros_like(reach)  # the furthest end of the recipient's ranges sorted before this one
    before[1:] = reach[:-1]
    before &= 0xFFFFFFFF
    np.maximum(before, start, out=before)
    before[first] = start[first]
    end -= before  # what each range counts: its part beyond that end
    np.maximum(end, 0, out=end)
    out = pa.table(
        {
            "nid": ids // n,
            "room": rooms[ids % n],
            "slots": np.add.reduceat(end, heads) if len(heads) else np.empty(0, dtype=np.int64),
        }
    )
    with arrow_view(con, "recipient_slots_out", out):
        con.execute("""CREATE OR REPLACE TEMP TABLE recipient_slots AS
            SELECT x.node, o.room AS recipient_room, o.slots
            FROM recipient_slots_out o JOIN node_index x ON node_number(x.base) = o.nid""")


STEPS = (
    define_rules,  # cross_account, possible_pair: rules several queries read, written once (macros)
    "gap_rooms",
    "read_provenance",
    order_alternatives,  # where an ambiguous landing makes other last writers possible
    "conflict_reads",  # reads whose last writer the clock bounds cannot settle: every possible one
    "write_effects",
    "unlanded_sends",  # transfers sent that never landed in the files: they may have written until concluded
    "unlanded_readers",  # ... and the reads within their reach
    "overwritten_sightings",  # ... and the sightings of another room's data they may have overwritten
    "pull_sightings",  # what a transfer carried from sender slots another room wrote since (a stale reference)
    "exposure_segments",
    "exposure_certain",
    "room_flags",
    node_missing,
    "log_outages",  # times a node logged nothing while the gateway routed it requests it never names
    "log_outages_unrouted",  # ... or while a prefill node finished rooms no decode node names (no routing)
    "outage_responses",  # ... and the responses whose evidence they may have taken
    "unread_responses",  # responses on nodes without page events whose engine's lines no logs-only rule reads
    "room_requests",
    release_scratch,  # node_own_rooms' readers (node_missing, room_requests) are done: ownership drops it
    "dark_rooms",  # what the engine logs say per room on nodes without page telemetry
    "node_lifecycle",  # ... and each room's lifecycle on each decode node, from its logs
    "signature_responses",
    "late_write_rule",  # the late-write rule from the logs alone, on every decode node
    "late_write_responses",  # responses a late transfer may have written into, on those nodes
    "missing_rooms",
    "exposures",
    "same_account_only",  # the requests whose every pair is of one account, named apart downstream
    recipient_slots,
    source_likelihood,  # an allocator model replayed over the logs of the nodes without page telemetry
    "signature_status",  # ... which also says whether a signature response's pages had been written
    "integrity_responses",  # the requests the engines' integrity lines name, confirmed or doubted by them
    "affected_responses",
    "response_overlap",  # rows that may be one response twice (a room no record names, a record naming no
    # room), and the least and most distinct responses the rows are (response_bounds)
    "tier_cases",  # each indeterminate tier's logs-only rule applied on the nodes with page telemetry
    "tier_reliability",  # each indeterminate tier's logs-only rule scored on the nodes with page telemetry
    "affected_times",  # when each counts as affected: the notices' and the report's one definition
    gap_sources,  # per lost seq gap on a node with page telemetry, every room a response after it could have read
    sender_sources,  # per response on a receiver whose senders lost events, every room an unlogged transfer may be
    # every request whose KV a response without page evidence (or indeterminate after a gap) could have
    # attended, and those whose text its response echoes (where the gateway logs text)
    ("possible_sources", {"gw_slack_us": GATEWAY_SLACK_US}),
    possible_reach,  # ... counted per source and per response without expanding the pairs
    "hazards",
    "coverage",
    evidence_damage,  # every loss the evidence shows, one row per damaged input (findings/damage.py)
    "account_requests",  # every request of every account in each role: what its counts and notices list
    "accounts",
)

# the findings CSVs and the query each is written from (findings/queries/)
OUTPUTS = {
    "affected_responses.csv": "affected_responses_csv",
    "exposures.csv": "exposures_csv",
    "possible_sources.csv": "possible_sources_csv",
    "content_matches.csv": "content_matches_csv",
    "accounts.csv": "accounts_csv",
    "hazards.csv": "hazards_csv",
    "coverage.csv": "coverage_csv",
    "rejected.csv": "rejected_csv",
    "evidence_damage.csv": "evidence_damage_csv",
    "gateway_join.csv": "gateway_join_csv",
    "possible_source_windows.csv": "possible_source_windows_csv",
}


def compute_findings(con: duckdb.DuckDBPyConnection) -> None:
    run_steps(con, "findings", STEPS)


def possible_pairs_plan(con: duckdb.DuckDBPyConnection, asked: bool | None) -> dict[str, object]:
    """How many possible pairs there are (counted, not expanded) and whether possible_sources.csv is written:
    `asked` True or False decides; None writes it up to POSSIBLE_PAIRS_LIMIT pairs."""
    row = con.execute("""SELECT (SELECT coalesce(sum(sources), 0) FROM possible_windows)
        + (SELECT count(*) FROM possible_extra)""").fetchone()
    n = int(row[0]) if row else 0
    write = asked if asked is not None else n <= POSSIBLE_PAIRS_LIMIT
    if asked is True:
        why = "asked for (--possible-pairs)"
    elif asked is False:
        why = "not asked for (--no-possible-pairs)"
    else:
        why = f"{'at most' if write else 'more than'} {POSSIBLE_PAIRS_LIMIT:,} pairs"
    if not write:
        why += ": possible_source_windows.csv and the view possible_sources of incident.duckdb hold them"
    return {"pairs": n, "written": write, "why": why}


def write_findings(con: duckdb.DuckDBPyConnection, out: Path, plan: dict[str, object]) -> dict[str, int]:
    (out / "possible_sources.csv").unlink(missing_ok=True)
    return {
        name: write_csv(con, load_query("findings", query), out / name)
        for name, query in OUTPUTS.items()
        if plan["written"] or name != "possible_sources.csv"
    }


def source_tier(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    """What the bundle's evidence measured of the allocator model's likely subset (the source_tier table
    forensics.findings.likelihood writes): whether the headline prints it, and why."""
    cur = con.execute("SELECT * FROM source_tier")
    names = [d[0] for d in cur.description]
    return dict(zip(names, cur.fetchone() or [None] * len(names), strict=True))


def tier_reliability(con: duckdb.DuckDBPyConnection) -> list[dict[str, object]]:
    """Each indeterminate tier of responses without page evidence with what the page evidence measured of
    it (the tier_reliability table): --json's tier_reliability."""
    cur = con.execute("SELECT * FROM tier_reliability ORDER BY tier")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def headline(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """affected, confirmed, indeterminate, customer (responses) and pairs (exposure rows)."""
    return query_rows(con, "findings", "headline")[0]

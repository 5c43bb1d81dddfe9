"""Issue #47: gateway records that name no engine id, assigned as a whole. With the gateway log as a
LiteLLM SpendLogs export, an aborted request is logged under LiteLLM's own call id; the records the id and
time joins leave open are assigned against the open rooms together (forensics.ingest.gateway_assign).
Against the simulator's truth (truth/gateway_ids.csv: the id LiteLLM logged; truth/responses.csv: each
request's room and account), on incidents with realistic aborts:
- every forced assignment (how 'assigned') is the record's own room;
- every room left open lists its own record, and so its account, among its candidates;
- every true source of an exposure is listed for notification: its own request as exposed or possibly
  exposed, under its own account (a source whose room stays open, under each candidate's)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

CASES = {
    "abort10-seed3": dict(seed=3, requests=600, abort_rate=0.1),
    "abort20-seed4": dict(seed=4, requests=600, abort_rate=0.2),
    "abort20-seed5": dict(seed=5, requests=600, abort_rate=0.2),
}


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("case", sorted(CASES))
def test_assignment_against_truth(tmp_path: Path, case: str) -> None:
    sim = tmp_path / "sim"
    simulate(sim, build_config("default", gateway_format="litellm_spendlogs", **CASES[case]))
    logged = {r["spec_request_id"]: r["format_request_id"] for r in _read(sim / "truth/gateway_ids.csv")}
    truth = {r["request_id"]: r for r in _read(sim / "truth/responses.csv")}
    by_room = {int(r["room"]): r for r in truth.values() if r["room"]}
    f = Findings(sim / "bundle")

    # forced assignments: each the record's own room
    assigned = f.rows(
        """SELECT g.request_id, g.account_id, j.room FROM gateway_joined j JOIN gateway g USING (file_id, row)
           WHERE j.how = 'assigned'"""
    )
    wrong = [(i, room) for i, _, room in assigned if logged[by_room[room]["request_id"]] != i]
    assert wrong == [], "a forced assignment to another request's room"
    assert all(acct == by_room[room]["account_id"] for _, acct, room in assigned)

    # open rooms: their own record and account among the candidates
    open_rooms: dict[int, set[tuple[str, str]]] = {}
    for room, rid, acct in f.rows("SELECT DISTINCT room, request_id, account_id FROM room_candidates"):
        open_rooms.setdefault(room, set()).add((rid, acct))
    assert assigned or open_rooms, "the incident must have records the id join leaves open"
    for room, cands in open_rooms.items():
        own = by_room[room]
        assert (logged[own["request_id"]], own["account_id"]) in cands, room

    # every true source is listed, under its own account, as exposed or possibly exposed
    listed = set(
        f.rows("SELECT account_id, request_id FROM account_requests WHERE role IN ('exposed', 'possibly_exposed')")
    )
    sources = {r["source_request_id"] for r in _read(sim / "truth/exposures.csv")}
    missed = [s for s in sources if (truth[s]["account_id"], logged[s]) not in listed]
    assert missed == [], "true sources no notification lists"
    # ... and an exposure whose source room stays open names every candidate's account
    for room, accounts in f.rows(
        "SELECT DISTINCT source_room, source_candidate_accounts FROM exposures WHERE source_request_id = ''"
    ):
        assert accounts is None or set(accounts.split(";")) == {a for _, a in open_rooms.get(room, set()) if a}
    f.con.close()

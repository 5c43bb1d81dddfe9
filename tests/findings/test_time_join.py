"""Issue #37: gateway records that name no engine id. LiteLLM logs a failed or aborted request under its
own litellm_call_id, which no engine saw; the analysis matches such a record to the engine requests no
record claims by model, time window (each node's clock bounded against the gateway's by the records
joined by id) and prompt length. Checked against the simulator's truth (truth/gateway_ids.csv: the id
LiteLLM logged for each request; truth/responses.csv: its room), on incidents dense with aborts so that
abort windows overlap:
- every record joined by time is joined to its own room;
- a record that several rooms fit is joined to none (its room stays unknown), and its own room is among
  the candidates it lists;
- every exposure whose source stays unknown is counted: accounts.csv's row without an account and the
  headline's totals count each such source once (by its room), beside the known accounts."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from forensics.db import query_rows, run_query
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

DENSE = dict(requests=600, abort_rate=0.3, duration_us=120_000_000)  # ~5 requests/s, 30% aborted
CASES = {
    # the spend log: a failure's prompt_tokens is LiteLLM's estimate (BerriAI/litellm#37365)
    "spendlogs-seed3": dict(seed=3, gateway_format="litellm_spendlogs", **DENSE),
    # skewed node clocks (+-0.6 s): the bounds come from the joined records alone
    "spendlogs-skew-seed4": dict(seed=4, gateway_format="litellm_spendlogs", clock_skew_ms=600, **DENSE),
    # the StandardLoggingPayload logs 0 prompt tokens for a failure: matched by model and time alone
    "payload-seed5": dict(seed=5, gateway_format="litellm_payload", **DENSE),
}


def _truth(sim: Path) -> tuple[dict[str, int], set[str]]:
    """LiteLLM's id of each request -> its room; the ids of the aborted requests."""
    ids = csv.DictReader((sim / "truth/gateway_ids.csv").open())
    spec = {r["format_request_id"]: r["spec_request_id"] for r in ids}
    resp = {r["request_id"]: r for r in csv.DictReader((sim / "truth/responses.csv").open())}
    room = {fmt: int(resp[s]["room"]) for fmt, s in spec.items()}
    aborted = {fmt for fmt, s in spec.items() if resp[s]["aborted"] == "1"}
    return room, aborted


@pytest.mark.parametrize("case", sorted(CASES))
def test_time_join_against_truth(tmp_path: Path, case: str) -> None:
    sim = tmp_path / "sim"
    simulate(sim, build_config("default", **CASES[case]))
    room, aborted = _truth(sim)
    f = Findings(sim / "bundle")
    basis = "time" if case.startswith("payload") else "time+length"

    # every time join is right
    joined = f.rows(
        """SELECT g.request_id, j.room, j.how FROM gateway_joined j JOIN gateway g USING (file_id, row)
           WHERE j.how NOT IN ('engine rid', 'x-request-id in an engine request log', 'trace id of an SGLang span')"""
    )
    assert joined, "the incident must have records joined by time"
    assert basis in {how for _, _, how in joined} <= {basis, "assigned"}  # assigned: tests/findings/test_assign.py
    wrong = [(i, r, room[i]) for i, r, _ in joined if r != room[i]]
    assert wrong == [], "records joined by time, or assigned, to another request's room"
    assert {i for i, _, _ in joined} <= aborted  # only failures lack the engine's id here

    # several candidates: none confirmed, the record's room stays unknown, its own room among them
    unjoined = f.rows("SELECT request_id, candidates, reason FROM gateway_unjoined WHERE rooms = 0")
    ambiguous = [(i, n, why) for i, n, why in unjoined if n >= 1]
    assert len(ambiguous) >= 10, "the incident must have records that several engine requests fit"
    held = dict(f.rows("SELECT request_id, bootstrap_room FROM gateway SEMI JOIN gateway_unjoined USING (request_id)"))
    assert {held[i] for i, _, _ in ambiguous} == {None}
    for i, n, why in ambiguous:  # an aborted request reached the engines: its room is a candidate
        listed = {int(x) for x in re.findall(r"\d{6,}", why)}
        assert i not in aborted or n > 10 or room[i] in listed, (i, why)
    # a record no engine request fits reached no engine (a 400: longer than the context) or is an abort
    # whose room another record's time join took (it would then be wrong: checked above)
    assert not {i for i, n, _ in unjoined if n == 0} & aborted

    # unknown source accounts: counted, not dropped
    exposures = f.rows("SELECT count(*) FROM exposures")[0][0]
    assert exposures == sum(1 for _ in (sim / "truth/exposures.csv").open()) - 1  # no pair lost
    unknown = f.rows(
        """SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM exposures
           WHERE coalesce(source_account_id, '') = ''"""
    )[0][0]
    assert unknown > 0, "the incident must have sources whose account stays unknown"
    (row,) = f.rows("SELECT requests_exposed, requests_exposed_confirmed FROM accounts WHERE account_id IS NULL")
    assert row[0] == unknown
    run_query(f.con, "report", "report_affected")
    (t,) = query_rows(f.con, "report", "exclusion_totals")
    sources = f.rows(
        """SELECT count(DISTINCT source_key(source_request_id, source_room)), count(DISTINCT source_account_id)
           FROM exposures WHERE coalesce(source_cohort, 'customer') = 'customer'"""
    )[0]
    assert (t["customer_sources"], t["customer_source_accounts"], t["customer_source_unknown"]) == (*sources, unknown)
    # ... and the blast radius lists every source, those of unknown request by their room
    run_query(f.con, "report", "blast_sources")
    listed = f.rows("SELECT source_request_id, source_room FROM report_sources")
    total = f.rows("SELECT count(DISTINCT source_key(source_request_id, source_room)) FROM exposures")[0][0]
    assert len(listed) == total and sum(1 for i, _ in listed if i == "") > 0
    f.con.close()

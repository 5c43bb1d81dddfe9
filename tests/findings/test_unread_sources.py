"""Issue #50: a decode node without page events whose engine's lines no logs-only rule reads (vLLM's:
`forensics simulate --engine vllm`) decides nothing. On simulated vLLM incidents with decode-1
uninstrumented (seeds no other test uses), against the simulator's truth: every delivered response it
served is indeterminate with evidence `none` (never clean, never `pages`), every truly affected one among
them; and every true source of such a response is among its possible sources (the view possible_sources),
whose count per response possible_reach gives without the pairs, and whose accounts are notified."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

NODE = "decode-1"


def on_node(f: Findings, sql: str) -> list[tuple]:
    """The rows of `sql`, its one parameter the node."""
    return f.con.execute(sql, [NODE]).fetchall()


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=[71, 79, 83])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Findings]:
    out = tmp_path_factory.mktemp(f"unread{request.param}")
    simulate(out, build_config(seed=request.param, requests=240, engine="vllm", no_telemetry=NODE))
    return out, Findings(out / "bundle")


def test_every_response_on_the_node_is_indeterminate_without_evidence(run: tuple[Path, Findings]) -> None:
    out, f = run
    truth = [t for t in _read(out / "truth" / "responses.csv") if t["decode_node"] == NODE]
    delivered = {t["request_id"] for t in truth if t["status"].startswith("2")}
    exposed = {t["request_id"] for t in truth if t["exposed"] == "1"}
    assert delivered and exposed <= delivered
    got = {r[0]: r[1:] for r in f.rows("SELECT request_id, status, evidence FROM affected_responses")}
    assert delivered <= set(got)  # none cleared, every truly affected one among them
    assert {got[r] for r in delivered} == {("indeterminate", "none")}


def test_every_true_source_is_a_possible_source(run: tuple[Path, Findings]) -> None:
    out, f = run
    truth = {t["request_id"]: t for t in _read(out / "truth" / "responses.csv")}
    pairs = {(e["recipient_request_id"], e["source_request_id"]) for e in _read(out / "truth" / "exposures.csv")
             if e["node"] == NODE}  # fmt: skip
    assert pairs
    possible = set(on_node(f, "SELECT recipient_request_id, source_request_id FROM possible_sources WHERE node = ?"))
    assert pairs <= possible
    # the sources' accounts are among those the accounts and notifications count (possible_source_requests)
    notified = {r[0] for r in on_node(f, "SELECT source_account_id FROM possible_source_requests WHERE node = ?")}
    assert {truth[s]["account_id"] for _, s in pairs} <= notified
    # possible_reach's counts without the pairs are the view's
    counted = dict(on_node(f, "SELECT recipient_request_id, sources FROM possible_windows WHERE node = ?"))
    expanded = dict(on_node(f, "SELECT recipient_request_id, count(*) FROM possible_sources WHERE node = ? GROUP BY 1"))
    assert {k: v for k, v in counted.items() if v} == expanded
    # the gateway's times bound them: a request received after a response's end is not its source
    late = on_node(
        f,
        """SELECT count(*) FROM possible_sources s
        JOIN (SELECT request_id, min(ts) AS ts FROM gateway GROUP BY 1) g ON g.request_id = s.source_request_id
        JOIN possible_windows w ON w.recipient_request_id = s.recipient_request_id AND w.node = s.node
        WHERE s.node = ? AND g.ts > w.finished""",
    )
    assert late == [(0,)]
    # ... and they narrow the pool: an early response's sources are fewer than the node's other requests
    pool = on_node(f, "SELECT count(*) FROM possible_pool WHERE node = ?")[0][0]
    assert min(counted.values()) < pool - 1

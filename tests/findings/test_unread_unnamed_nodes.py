"""Issue #50: a vLLM cluster behind a gateway that logs no decode node (LiteLLM's spend logs), with a
decode node without page events. vLLM's lines name no room, and LiteLLM's own request ids never reach
the engines, so no record is joined to a node: each delivered response may have been served by the
uninstrumented node, and the evidence cannot clear it. Against the simulator's truth (a seed no other
test uses; the gateway's ids mapped by truth/gateway_ids.csv): every delivered response the
uninstrumented node truly served is listed, none cleared; every truly exposed response is listed; every
true source of a response on that node is among its possible sources. (Before, none of them was listed:
the headline counted only the page events' confirmed responses.)"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

NODE = "decode-1"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Findings, dict[str, str]]:
    out = tmp_path_factory.mktemp("unnamed")
    cfg = build_config(seed=93, requests=240, engine="vllm", no_telemetry=NODE, gateway_format="litellm_spendlogs")
    simulate(out, cfg)
    ids = {r["spec_request_id"]: r["format_request_id"] for r in _read(out / "truth" / "gateway_ids.csv")}
    return out, Findings(out / "bundle"), ids


def test_no_record_names_a_node(run: tuple[Path, Findings, dict[str, str]]) -> None:
    _, f, _ = run
    assert f.rows("SELECT count(*), count(decode_node) FROM gateway")[0] == (240, 0)


def test_every_response_the_node_served_is_listed_never_cleared(run: tuple[Path, Findings, dict[str, str]]) -> None:
    out, f, ids = run
    truth = _read(out / "truth" / "responses.csv")
    served = {ids[t["request_id"]] for t in truth if t["decode_node"] == NODE and t["status"].startswith("2")}
    exposed = {ids[t["request_id"]] for t in truth if t["exposed"] == "1"}
    assert served and exposed
    got = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    assert served <= set(got) and {got[r] for r in served} == {"indeterminate"}
    assert exposed <= set(got)
    evidence = dict(f.rows("SELECT request_id, evidence FROM affected_responses"))
    assert {evidence[r] for r in served} == {"none"}
    reasons = dict(f.rows("SELECT request_id, reason FROM affected_responses"))
    assert all(f"{NODE} may have served it" in reasons[r] for r in served)


def test_every_true_source_is_a_possible_source(run: tuple[Path, Findings, dict[str, str]]) -> None:
    out, f, ids = run
    pairs = {(ids[e["recipient_request_id"]], ids[e["source_request_id"]])
             for e in _read(out / "truth" / "exposures.csv") if e["node"] == NODE}  # fmt: skip
    assert pairs
    sql = "SELECT recipient_request_id, source_request_id FROM possible_sources WHERE node = ?"
    possible = set(f.con.execute(sql, [NODE]).fetchall())
    assert pairs <= possible

"""vLLM's PD path with the nodes' clocks skewed (issue #50): each node's offset drawn from [-3 s, +3 s]
(`simulate --clock-skew 3000`; seeds no other test uses, block size 32). The answers of test_vllm_pd hold
against the truth: no false confirmation, every exposed response reported, every true pair found with page
events, every true source of an indeterminate response possible without them. The stale references are
read by the block ids the decode's lines name (pull_sightings basis remote_block_ids), and every vLLM node's
clock bounds hold its true offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.findings.test_vllm_pd import _truth
from tests.findings.test_vllm_pd import test_logs_only_every_exposure_indeterminate_with_its_sources as logs_only
from tests.support.analysis import Findings

SKEW_MS = 3000


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    out = tmp_path_factory.mktemp("vllmpd-skew")
    cfg = build_config(seed=619, requests=300, page_size=32, engine="vllm", vllm_pd=True, clock_skew_ms=SKEW_MS)
    simulate(out, cfg)
    return out, {n.name: n.clock_offset_us for n in cfg.nodes}


def test_with_page_events_no_false_confirmation_and_the_pulls_read_by_block_ids(
    skewed: tuple[Path, dict[str, int]],
) -> None:
    out, offsets = skewed
    assert max(abs(o) for o in offsets.values()) > 1_000_000  # the draw skews at least one node by over a second
    resp, pairs = _truth(out)
    exposed = {k for k, t in resp.items() if t["exposed"] == "1"}
    assert exposed and pairs
    f = Findings(out / "bundle")
    got = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    assert exposed <= set(got)
    assert {k for k, s in got.items() if s == "confirmed"} <= exposed
    found = f.rows("SELECT recipient_request_id, source_request_id, status FROM exposures")
    assert {(a, b) for a, b, s in found if s == "confirmed"} <= pairs
    assert pairs <= {(a, b) for a, b, _ in found}
    assert f.rows("SELECT DISTINCT basis FROM pull_sightings") == [("remote_block_ids",)]
    for node, lo, hi in f.rows("SELECT node, lo_us, hi_us FROM gateway_clock WHERE consistent"):
        assert lo < offsets[node] < hi, node
    assert {n for (n,) in f.rows("SELECT node FROM gateway_clock WHERE consistent")} == set(offsets)


def test_logs_only_every_true_source_possible(skewed: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    logs_only(skewed[0], tmp_path)

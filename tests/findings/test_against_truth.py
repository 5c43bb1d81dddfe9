"""Findings on simulated incidents against the simulator's ground truth (computed from simulated pool
contents, independently of the analysis): every exposed response reported, every confirmed one truly
exposed, indeterminate only where the truth allows it, exposure pairs and slot counts matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.truthcheck import compare

pytestmark = pytest.mark.slow  # whole simulated incidents, analysed several times

CASES = [
    dict(seed=5, requests=600, page_size=1),
    dict(seed=6, requests=900, page_size=16),
    dict(seed=11, requests=900, page_size=64),
    dict(seed=7, requests=1200, page_size=16, no_telemetry="decode-2", gap_node="decode-0", gap_events=30),
    dict(seed=8, requests=1200, page_size=16, gap_node="prefill-0", gap_events=20),
]
# skewed clocks (up to +-0.6 s), other topologies, and late landings close to the next holder's own
# transfer: transfer pairs whose order the clock bounds cannot settle (each case holds several)
CLOSE = dict(requests=1500, abort_rate=0.15, late_clear_ms=0, read_delay_ms=20)
CASES += [
    dict(seed=13, page_size=1, clock_skew_ms=600, **CLOSE),
    dict(seed=8, page_size=32, clock_skew_ms=600, **CLOSE),
    dict(seed=21, page_size=16, clock_skew_ms=100, prefill_count=3, decode_count=2, **CLOSE),
    dict(seed=22, page_size=64, clock_skew_ms=600, prefill_count=4, decode_count=3, **CLOSE),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_findings_match_ground_truth(tmp_path: Path, case: dict) -> None:
    simulate(tmp_path / "sim", build_config("default", **case))
    c = compare(tmp_path / "sim")
    assert c.truth_pairs > 0, "the simulated incident must contain exposures"
    assert c.missed == [], "truly exposed responses not reported"
    assert c.false_confirmed == [], "confirmed but not exposed"
    assert c.bad_indeterminate == [], "indeterminate where the evidence decides"
    assert c.pair_recall >= 0.99 and c.pair_precision >= 0.99
    assert c.slot_mismatches == []
    assert c.signature_not_confirmed == [], "complete placeholder signatures not confirmed"
    assert c.possible_pair_recall == 1.0 and c.possible_account_recall == 1.0

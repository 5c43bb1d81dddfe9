"""Responses on a decode node without page telemetry, from the engine logs alone, against the
simulator's truth: every complete placeholder signature confirmed, and the possible sources a superset
of the true (recipient, source) pairs and of the true source accounts, on several seeds, page sizes,
dark nodes, abort rates and page-reuse policies; and the allocator model's likely subset (likelihood at
least 0.5) and its calibration (the sum of the likelihoods against the true pair count)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.truthcheck import compare

pytestmark = pytest.mark.slow  # whole simulated incidents

CASES = [
    dict(seed=3, requests=700, page_size=1, no_telemetry="decode-0"),
    dict(seed=9, requests=700, page_size=16, no_telemetry="decode-1", abort_rate=0.15),
    dict(seed=17, requests=700, page_size=64, no_telemetry="decode-2", abort_rate=0.1),
    dict(seed=23, requests=700, page_size=32, no_telemetry="decode-1", decode_count=2, prefill_count=3),
    dict(seed=51, requests=900, page_size=16, no_telemetry="decode-1", abort_rate=0.1, decode_reuse="lifo"),
    dict(seed=52, requests=900, page_size=8, no_telemetry="decode-0", abort_rate=0.1, decode_reuse="deferred"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_signatures_confirmed_and_possible_sources_cover_the_truth(tmp_path: Path, case: dict) -> None:
    simulate(tmp_path / "sim", build_config("default", **case))
    c = compare(tmp_path / "sim")
    assert c.dark_truth_pairs > 0, "the dark node must hold exposures for the check to mean something"
    assert c.signature_not_confirmed == []
    assert c.possible_pair_recall == 1.0
    assert c.possible_account_recall == 1.0
    assert c.possible_pairs >= c.dark_truth_pairs
    assert c.missed == [] and c.false_confirmed == []
    # the allocator model, learned from the instrumented decode nodes and calibrated on them
    assert c.likely_precision >= 0.8 and c.likely_recall >= 0.8, (c.likely_precision, c.likely_recall)
    assert 0.7 * c.dark_truth_pairs <= c.likelihood_sum <= 1.5 * c.dark_truth_pairs, c.likelihood_sum

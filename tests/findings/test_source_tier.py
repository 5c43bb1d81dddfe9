"""The likely subset is printed only where the bundle's own page evidence measured it: precision at least
MIN_PRECISION on at least MIN_TRUE_PAIRS true pairs, held out by node where there are two or more
calibration nodes. Calibration counts built by hand, per hit count 0..MEMBERS."""

from __future__ import annotations

import numpy as np

from forensics.findings.allocator_walk import MEMBERS
from forensics.findings.calibration import MIN_PRECISION, MIN_TRUE_PAIRS, Calibration, measure_tier


def _cal(**nodes: tuple[list[int], list[int]]) -> Calibration:
    """node -> (true pairs, candidate pairs) for the top hit counts (MEMBERS, MEMBERS - 1, ...); the rest
    of the candidates sit at 0 hits, all false."""
    cal = Calibration([], {}, {})
    for node, (true, total) in nodes.items():
        t, n = np.zeros(MEMBERS + 1, dtype=np.int64), np.zeros(MEMBERS + 1, dtype=np.int64)
        for i, (a, b) in enumerate(zip(true, total, strict=True)):
            t[MEMBERS - i], n[MEMBERS - i] = a, b
        n[0] = 5_000
        cal.nodes.append(node)
        cal.true[node], cal.total[node] = t, n
    return cal


def test_nothing_to_calibrate_on_prints_no_likely_count_and_says_why() -> None:
    tier = measure_tier(Calibration([], {}, {}))
    assert not tier.calibrated and not tier.printed and tier.precision is None
    assert "cannot rank" in tier.reason
    assert Calibration([], {}, {}).rates() is None  # and no likelihood at all


def test_a_top_bucket_that_is_41_percent_true_is_not_printed() -> None:
    """Every replay agrees on the pairs of the top bucket, yet only 41% of them are true (what a model
    fitted to another simulator's allocator does): the rates put them below 0.5, nothing is likely."""
    tier = measure_tier(_cal(a=([41], [100]), b=([40], [100])))
    assert tier.calibrated and not tier.printed
    assert tier.precision is None and "do not single sources out" in tier.reason


def test_a_precise_model_is_printed_with_its_measured_reliability() -> None:
    tier = measure_tier(_cal(a=([95, 3], [100, 10]), b=([90, 2], [100, 10])))
    assert tier.printed and tier.held_out
    assert tier.precision is not None and tier.precision >= MIN_PRECISION
    assert f"{tier.precision:.2f}" in tier.reason and "held out by node on a, b" in tier.reason


def test_held_out_precision_below_the_bar_withholds_the_count() -> None:
    """Each node's own rates would call its top bucket likely; held out, node b's 55% true top bucket
    pulls the measured precision under MIN_PRECISION."""
    tier = measure_tier(_cal(a=([95], [100]), b=([55], [100])))
    assert tier.calibrated and not tier.printed
    assert tier.precision is not None and tier.precision < MIN_PRECISION
    assert "cannot tell these sources apart" in tier.reason


def test_too_few_true_pairs_to_measure_withholds_the_count() -> None:
    few = MIN_TRUE_PAIRS - 1
    tier = measure_tier(_cal(a=([few], [few])))
    assert not tier.printed and not tier.held_out and "too few true pairs" in tier.reason
    tier = measure_tier(_cal(a=([MIN_TRUE_PAIRS], [MIN_TRUE_PAIRS])))
    assert tier.printed and "in sample, one node" in tier.reason

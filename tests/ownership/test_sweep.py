"""The sweep that pairs events with the holdings they hit (forensics.ownership.kernels.sweep) against
the plain definition, a check of every pair, on random holdings and queries: nested and disjoint
slot ranges, equal ranks, empty ranges, many holdings alive at once."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.ownership.kernels.sweep import BUCKET, hits


def _brute(q: tuple[np.ndarray, ...], h: tuple[np.ndarray, ...]) -> set[tuple[int, int]]:
    q_kg, q_s, q_e = q
    h_a, h_f, h_s, h_e = h
    alive = (h_a[None, :] < q_kg[:, None]) & (q_kg[:, None] < h_f[None, :])
    overlap = (h_s[None, :] < q_e[:, None]) & (h_e[None, :] > q_s[:, None])
    qi, hi = np.nonzero(alive & overlap)
    return set(zip(qi.tolist(), hi.tolist(), strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_the_sweep_finds_exactly_the_pairs_alive_and_overlapping(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_h, n_q = 400, 300
    span = int(rng.choice([64, BUCKET, 5 * BUCKET]))  # ranges within a bucket, across a few, across many
    h_a = rng.integers(0, 1000, n_h)
    h_f = h_a + rng.integers(0, 400, n_h)  # some end at once (never alive)
    h_s = rng.integers(0, 20 * BUCKET, n_h)
    h_e = h_s + rng.integers(0, span, n_h)  # some empty
    q_kg = rng.integers(0, 1400, n_q)
    q_kg[:20] = h_a[:20]  # at a holding's own rank: not alive yet
    q_s = rng.integers(0, 20 * BUCKET, n_q)
    q_e = q_s + rng.integers(0, span, n_q)
    qi, hi = hits(q_kg, q_s, q_e, h_a, h_f, h_s, h_e)
    got = list(zip(qi.tolist(), hi.tolist(), strict=True))
    assert len(got) == len(set(got)), "a pair is reported once"
    want = _brute((q_kg, q_s, q_e), (h_a, h_f, h_s, h_e))
    assert len(want) > 50, "the case must hold pairs for the check to mean something"
    assert set(got) == want

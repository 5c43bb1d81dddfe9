"""forensics.ownership.kernels.prefetch: a hint only. Compiled code that prefetches (rows in range, past either end,
of 1-D and 2-D arrays) computes what the same code without it does, and nothing crashes."""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.ownership.kernels.prefetch import prefetch


@njit(cache=False)
def _gather(rec, idx, ahead):
    total = 0
    for i in range(idx.size):
        if ahead and i + ahead < idx.size:
            prefetch(rec, idx[i + ahead])
            prefetch(rec, idx[i + ahead] - rec.shape[0])  # below the array: clamped
            prefetch(rec, idx[i + ahead] + 10**12)  # past its end: clamped
        total += rec[idx[i], 0] * (i + 1)
    return total


@njit(cache=False)
def _gather_1d(col, idx):
    total = 0
    for i in range(idx.size):
        if i + 8 < idx.size:
            prefetch(col, idx[i + 8] + 10**12)
            prefetch(col, idx[i + 8])
        total += col[idx[i]] * (i + 1)
    return total


def test_prefetch_changes_no_result() -> None:
    rng = np.random.default_rng(3)
    for rows in (1, 7, 5000):
        rec = rng.integers(-1000, 1000, (rows, 5))
        idx = rng.integers(0, rows, 20_000)
        want = int((rec[idx, 0] * np.arange(1, idx.size + 1)).sum())
        assert _gather(rec, idx, 0) == want
        assert _gather(rec, idx, 8) == want
        assert _gather_1d(rec[:, 0].copy(), idx) == want

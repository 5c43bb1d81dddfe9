"""Compiled per-event walks of the ownership stage: numpy and numba only, no DuckDB (the steps hand
them arrays and store what they return)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike


def frozen(a: ArrayLike, dtype: DTypeLike = np.int64) -> np.ndarray:
    """`a` as every kernel takes an array it only reads: C-contiguous, of `dtype`, read-only. Numba
    compiles a kernel once per type of its arguments, and a writable array is a type apart from a
    read-only one (Arrow's zero-copy arrays are read-only, a copied one is writable, and which one a
    column gives depends on its chunks and nulls): one type per argument is one compile (20 to 25 s of
    CPU for the larger walks) on a user's first run, whatever its data. A view, not a copy, where `a`
    is already contiguous and of `dtype`."""
    out = np.ascontiguousarray(a, dtype=dtype)
    if out.flags.writeable:
        out = out.view()
        out.flags.writeable = False
    return out

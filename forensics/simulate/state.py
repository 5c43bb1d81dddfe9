"""What the simulator tracks per request while it runs (the engine and its decode side share it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class St:
    d_pages: np.ndarray | None = None
    d_alloc_t: int = 0
    out_pages: np.ndarray | None = None
    out_eff: int = 0
    p_pages: np.ndarray | None = None
    matched: int = 0  # prompt tokens reached by share on prefill
    share_bid: int = -1
    p_start: int = 0
    land_t: int = 0
    read_t: int = 0
    end_t: int = 0
    nudges: int = 0
    pending: list[int] = field(default_factory=list)

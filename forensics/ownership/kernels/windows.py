"""The narrow landing windows' walk (forensics.ownership.steps.landing): which transfers have a receiver
event on their slots inside their seq window."""

from __future__ import annotations

import numpy as np
from numba import njit

NARROW = 1024  # windows this many seqs wide or less (landing_ambiguous/ joins the wider ones)


@njit(cache=True, nogil=True)
def mark_window_hits(ev_seq, ev_s, ev_e, lo, hi, xs, xe, hit):  # pragma: no cover
    """Mark transfer t when an event with lo[t] < seq < hi[t] overlaps [xs[t], xe[t]). lo is sorted;
    every window is at most NARROW wide, so only transfers with lo in [first - NARROW, last) can see
    an event of this chunk (its seqs ev_seq rise)."""
    n = ev_seq.size
    if n == 0:
        return
    a = np.searchsorted(lo, ev_seq[0] - NARROW - 1)
    b = np.searchsorted(lo, ev_seq[n - 1])
    for t in range(a, b):
        if hit[t]:
            continue
        j = np.searchsorted(ev_seq, lo[t] + 1)
        while j < n and ev_seq[j] < hi[t]:
            if ev_s[j] < xe[t] and ev_e[j] > xs[t]:
                hit[t] = True
                break
            j += 1

"""The landing windows' sweep (forensics.ownership.steps.landing): which transfers have a receiver event
on their slots strictly inside their seq window (seq_lo, seq_hi), however wide the window.

One pass over the receiver's events in seq order keeps, per slot, the highest seq of an event that
touched it so far, in a segment tree over the slot space (a range "raise to" update per event, a
range maximum per window). A window is answered just before the first event at or past its seq_hi:
then every event below seq_hi has been applied, and the window is hit exactly when the highest seq on
its slots lies above seq_lo. Cost: (events + windows) x log(slots), whatever the windows' widths or the
rooms in flight; the inequality join it replaced for wide windows made a row for every pair of
window and event inside it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NONE = np.iinfo(np.int64).min  # a slot no event has touched


def tree_for(slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(tag, sub) of an empty tree over `slots` slots: tag[i], the highest seq of an update that
    covered node i whole; sub[i], the highest seq of any update inside node i's range."""
    size = 1
    while size < max(slots, 1):
        size *= 2
    return np.full(2 * size, NONE, dtype=np.int64), np.full(2 * size, NONE, dtype=np.int64)


@njit(cache=True, nogil=True, inline="always")
def _raise(tag, sub, lo, hi, v):  # pragma: no cover
    """Every slot of [lo, hi) to at least v (bottom-up; no push-down: queries read the tags above)."""
    size = tag.size // 2
    left, right = lo + size, hi + size
    a, b = left, right
    while a < b:
        if a & 1:
            tag[a] = max(tag[a], v)
            sub[a] = max(sub[a], v)
            a += 1
        if b & 1:
            b -= 1
            tag[b] = max(tag[b], v)
            sub[b] = max(sub[b], v)
        a >>= 1
        b >>= 1
    i, j = left >> 1, (right - 1) >> 1
    while i >= 1:
        sub[i] = max(sub[i], v)
        sub[j] = max(sub[j], v)
        i >>= 1
        j >>= 1


@njit(cache=True, nogil=True, inline="always")
def _highest(tag, sub, lo, hi):  # pragma: no cover
    """The highest value over the slots of [lo, hi): sub of the covering nodes, tags of every node
    above the range's two end leaves (such a tag covered a slot of the range)."""
    if lo >= hi:
        return NONE
    size = tag.size // 2
    left, right = lo + size, hi + size
    best = NONE
    a, b = left, right
    while a < b:
        if a & 1:
            best = max(best, sub[a])
            a += 1
        if b & 1:
            b -= 1
            best = max(best, sub[b])
        a >>= 1
        b >>= 1
    i, j = left >> 1, (right - 1) >> 1
    while i >= 1:
        best = max(best, tag[i], tag[j])
        i >>= 1
        j >>= 1
    return best


@njit(cache=True, nogil=True)
def sweep_windows(
    ev_seq, ev_s, ev_e, w_lo, w_hi, w_s, w_e, by_hi, lo_sorted, reach, at, tag, sub, hit
):  # pragma: no cover
    """Feed one chunk of the receiver's events (seqs rising, also across chunks) through the tree and
    answer the windows it passes. by_hi: the windows' indices by seq_hi; lo_sorted: their seq_lo
    sorted, reach[i] the highest seq_hi among the first i + 1 of those: an event that no window
    contains (no seq_lo below it whose window reaches past it) changes no answer and is skipped.
    at: where the walk stands, carried from chunk to chunk (windows of by_hi answered, seq_lo below
    the last event). The tree spans every slot of the events and windows."""
    m = by_hi.size
    done, below = at[0], at[1]
    for j in range(ev_seq.size):
        s = ev_seq[j]
        while done < m and w_hi[by_hi[done]] <= s:
            t = by_hi[done]
            hit[t] = _highest(tag, sub, w_s[t], w_e[t]) > w_lo[t]
            done += 1
        while below < m and lo_sorted[below] < s:
            below += 1
        if below > 0 and reach[below - 1] > s:
            _raise(tag, sub, ev_s[j], ev_e[j], s)
    at[0], at[1] = done, below


@njit(cache=True, nogil=True)
def finish_windows(w_lo, w_s, w_e, by_hi, at, tag, sub, hit):  # pragma: no cover
    """Answer the windows left once every event is in."""
    for d in range(at[0], by_hi.size):
        t = by_hi[d]
        hit[t] = _highest(tag, sub, w_s[t], w_e[t]) > w_lo[t]

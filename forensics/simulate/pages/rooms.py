"""The realistic generator's compiled bookkeeping of rooms (the loop: forensics.simulate.pages.loop): the
rooms in flight and pages held per decode node over time, the check that keeps a late landing clear of
other events on its slots, and a finished request's slot handed back."""

# ruff: noqa: F405 (the layout's column names)
from __future__ import annotations

import numpy as np
from numba import njit

from forensics.simulate.pages.layout import *  # noqa: F403


@njit(cache=True)
def track(NS: np.ndarray, d: int, t: int, dinfl: int, dused: int, t_warm: int, frozen: bool) -> None:
    """Rooms in flight and pages held on decode node d, integrated over time (after the warm-up and
    until the arrivals stop: NB_AREA; from the start: NB_AREA_ALL)."""
    lt = NS[d, NB_LASTT]
    if not frozen:
        a = max(lt, t_warm)
        if t > a:
            NS[d, NB_AREA] += NS[d, NB_INFL] * (t - a)
            NS[d, NB_UAREA] += NS[d, NB_USED] * (t - a)
        NS[d, NB_AREA_ALL] += NS[d, NB_INFL] * (t - lt)
        NS[d, NB_UAREA_ALL] += NS[d, NB_USED] * (t - lt)
    NS[d, NB_LASTT] = t
    NS[d, NB_INFL] += dinfl
    NS[d, NB_USED] += dused
    if NS[d, NB_INFL] > NS[d, NB_MAXINFL]:
        NS[d, NB_MAXINFL] = NS[d, NB_INFL]
    if NS[d, NB_USED] > NS[d, NB_MAXUSED]:
        NS[d, NB_MAXUSED] = NS[d, NB_USED]


@njit(cache=True)
def near(x: int, t: int, clear: int) -> bool:
    return x >= 0 and abs(x - t) < clear


@njit(cache=True)
def late_conflict(
    ST: np.ndarray,
    NS: np.ndarray,
    slot: int,
    t: int,
    ps: int,
    clear: int,
    depth: int,
    AR: np.ndarray,
    holder: np.ndarray,
    pos: np.ndarray,
    free_t: np.ndarray,
    late_t: np.ndarray,
) -> int:
    """0 if nothing stands within `clear` of a late landing at t on its receiver pages; 1 if an event on
    them is (or is scheduled for their holder) that near; 2 if only a page free near the top of the
    stack (likely handed out within `clear`) stands in the way."""
    dn = ST[slot, DN]
    base = NS[dn, NB_BASE]
    top = NS[dn, NB_TOP]
    amask = (1 << ARENA_BITS) - 1
    worst = 0
    for r in range(ST[slot, AR_N]):
        i = (ST[slot, AR_OFF] + r) & amask
        for p in range(AR[i, 0] // ps, (AR[i, 1] - 1) // ps + 1):
            g = base + p
            if late_t[g] > t - clear:
                return 1
            h = holder[g]
            if h < 0:
                if free_t[g] > t - clear:
                    return 1
                if top - 1 - pos[g] < depth:
                    worst = 2
            elif (
                near(ST[h, T_A], t, clear)
                or near(ST[h, T_X], t, clear)
                or near(ST[h, T_R], t, clear)
                or near(ST[h, T_END], t, clear)
                or near(ST[h, T_AB], t, clear)
            ):
                return 1
    return worst


@njit(cache=True)
def finish(
    G: np.ndarray, ST: np.ndarray, SLOTS: np.ndarray, slot: int, FS: np.ndarray, EPRC: np.ndarray, EPRN: np.ndarray
) -> None:
    c = ST[slot, CLS]
    FS[1] -= ST[slot, EST] / 16.0
    EPRN[c] += 1
    EPRC[c] += (ST[slot, EV] - EPRC[c]) / min(EPRN[c], 200)  # the mean, then a moving one (fragmentation grows)
    G[G_FIN_EV] += ST[slot, EV]
    G[G_FIN_N] += 1
    G[G_ALIVE] -= 1
    SLOTS[G[G_NFREE]] = slot
    G[G_NFREE] += 1

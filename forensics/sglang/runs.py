"""A batch's slots as runs of consecutive slots, the recorder's layout of an event (a run per request and
stretch), and NONE, the ledger's "no room"."""

from __future__ import annotations

import numpy as np

NONE = -1


def run_cols(slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-open ranges of consecutive slots, in the order given, as two arrays (starts, ends): what the
    recorder takes in one call, no tuple per run."""
    if slots.size == 0:
        return slots[:0], slots[:0]
    brk = np.flatnonzero(np.diff(slots) != 1) + 1
    return slots[np.concatenate(([0], brk))], slots[np.concatenate((brk - 1, [slots.size - 1]))] + 1


def runs_of(slots: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """run_cols() of many requests' slots at once, `owner[i]` the request of slots[i] (requests one after
    another): (index of each run's request, its start, its end), in the order given."""
    brk = np.flatnonzero((np.diff(slots) != 1) | (np.diff(owner) != 0)) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk, [slots.size])) - 1
    return owner[first], slots[first], slots[last] + 1

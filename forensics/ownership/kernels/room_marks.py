"""The rooms a node's own events name, each written about once (forensics.ownership.steps.screen)."""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.keys import OP_XFER


@njit(cache=True, nogil=True)
def room_marks(opc, room, recent, used, out):  # pragma: no cover
    """Write to `out` the rooms of the node's own events (opc other than OP_XFER: transfers landed in it)
    that are not among the rooms seen lately, and return how many. `recent`/`used`: a direct-mapped
    table of rooms seen lately, carried over between chunks. A room's events lie close together in a
    node's event order, so almost every room is written once; one pushed out of the table by another is
    written again."""
    mask = recent.shape[0] - 1
    n = 0
    for i in range(room.size):
        if opc[i] == OP_XFER:
            continue
        r = room[i]
        u = np.uint64(r) * np.uint64(0x9E3779B97F4A7C15)
        h = np.int64(u >> np.uint64(40)) & mask
        if used[h] and recent[h] == r:
            continue
        used[h] = True
        recent[h] = r
        out[n] = r
        n += 1
    return n

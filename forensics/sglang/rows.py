"""Attribution (forensics.sglang.runtime's ledger, each a method's delegate here): SGLang's allocators hand
out slots without saying for whom. A slot is "fresh" from its allocation until the request-to-token pool
writes it into a request's row; that write names the request, so the alloc event is logged then (a page
that never reaches a row is not a request's); a slot another room holds, written into a row, is a
radix-cache share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.sglang.runs import NONE, run_cols


def row_write(rt: Any, row: int, slots: np.ndarray) -> None:
    """The row of a request now names these slots: fresh ones are its allocation, slots another
    room holds are a radix-cache share."""
    owner = rt.rows.get(row)
    if owner is None or slots.size == 0:
        return
    room = owner[0]
    rt._grow(int(slots.max()))
    fr = rt.fresh[slots]
    if fr.any():
        rt.tick += 1
        s = rt._page_slots(slots[fr])
        rt.fresh[s] = False
        rt.holder[s] = room
        rt.atick[s] = rt.tick
        rt.stats.allocated_pages += len(s) // rt.ps
        if rt.rec is not None:
            rt.rec.ev_cols("alloc", room, *run_cols(s))
    other = slots[~fr]
    if other.size:
        h = rt.holder[other]
        sh = other[(h >= 0) & (h != room)]
        if sh.size:
            rt.shared.setdefault(room, set()).update(sh.tolist())
            rt.reader[sh] = room
            if rt.rec is not None:
                rt.rec.ev_cols("share", room, *run_cols(sh))


def rows_write_batch(rt: Any, rows: np.ndarray, slots: np.ndarray) -> None:
    """One slot per (row, slot) pair, many rows at once (a decode step's out_cache_loc written into
    the rows): the common case, fresh slots, handled for the whole batch; others row by row."""
    if slots.size == 0:
        return
    rt._grow(int(slots.max()))
    rr = rt.row_room
    rooms = np.where(rows < len(rr), rr[np.minimum(rows, len(rr) - 1)], NONE)
    fr = rt.fresh[slots] & (rooms != NONE)
    if fr.any() and (rt.ps == 1 or np.unique(slots[fr] // rt.ps).size == int(fr.sum())):
        # each fresh slot opens a page of its own (a decode step: one slot per request): the pages
        # taken at once, an alloc event per page, as on_row_write gives them one by one
        s, rm, ps = slots[fr], rooms[fr], rt.ps
        first = s - s % ps
        full = (first[:, None] + np.arange(ps)).ravel() if ps > 1 else s
        rt.tick += 1
        rt.fresh[full] = False
        rt.holder[full] = np.repeat(rm, ps) if ps > 1 else rm
        rt.atick[full] = rt.tick
        rt.stats.allocated_pages += int(s.size)
        if rt.rec is not None:
            rt.rec.ev_cols("alloc", rm, first, first + ps)
        rest = ~fr
    else:
        rest = np.ones(slots.size, bool)
    rest &= rooms != NONE
    if rest.any():
        h = rt.holder[slots]
        rest &= rt.fresh[slots] | ((h >= 0) & (h != rooms))  # fresh pages (ps > 1) or shares
        for k in np.flatnonzero(rest).tolist():
            row_write(rt, int(rows[k]), slots[k : k + 1])

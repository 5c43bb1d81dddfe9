"""The transfer-link walk (forensics.ownership.steps.transfers): the transfers of one receiver grouped
by room in an open-addressing table, and each receiver event matched to the transfers of its room
whose slots it overlaps."""

from __future__ import annotations

import numpy as np
from numba import njit

NONE_HI = np.iinfo(np.int64).max  # no read found
NONE_LO = np.iinfo(np.int64).min  # no alloc / free found
# the link walk's own kinds of receiver event, not forensics.keys' op codes (a read and a share are one
# kind here): reads and shares (the first counts), allocs and frees (before it)
KIND_READ, KIND_ALLOC, KIND_FREE = 0, 1, 2
# per transfer, in group order: its slots, then what the receiver's events say about it
XS, XE, RSEQ, RTS, ASEQ, ATS, FSEQ = range(7)


@njit(cache=True, nogil=True)
def room_slot(table, room):  # pragma: no cover
    """Where `room` is, or would go, in the open-addressing room table (rows: room, group or -1 when
    free; a power of two of them, at most 3/4 used)."""
    mask = table.shape[0] - 1
    u = np.uint64(room) * np.uint64(0x9E3779B97F4A7C15)
    h = np.int64(u ^ (u >> np.uint64(32))) & mask
    while table[h, 1] >= 0 and table[h, 0] != room:
        h = (h + 1) & mask
    return h


@njit(cache=True, nogil=True)
def reset_links(rec):  # pragma: no cover
    for r in range(rec.shape[0]):
        rec[r, RSEQ] = NONE_HI
        rec[r, RTS] = 0
        rec[r, ASEQ] = NONE_LO
        rec[r, ATS] = 0
        rec[r, FSEQ] = NONE_LO


@njit(cache=True, nogil=True)
def group_by_room(room, xs, xe):  # pragma: no cover
    """Group the transfers by room, groups numbered in order of first transfer (so the groups of
    rooms active at the same time lie close together). Returns (room table, first row of each group
    and one past the last, transfer -> row, rows: xs, xe and the link fields, as reset_links sets them)."""
    m = room.size
    size = 16
    while 3 * size < 4 * m:  # at most 3/4 full
        size *= 2
    table = np.empty((size, 2), dtype=np.int64)
    table[:, 1] = -1
    of = np.empty(m, dtype=np.int64)
    count = np.zeros(m + 1, dtype=np.int64)
    groups = 0
    for t in range(m):
        h = room_slot(table, room[t])
        if table[h, 1] < 0:
            table[h, 0] = room[t]
            table[h, 1] = groups
            groups += 1
        of[t] = table[h, 1]
        count[of[t] + 1] += 1
    first = np.cumsum(count[: groups + 1])
    fill = first[:groups].copy()
    row = np.empty(m, dtype=np.int64)
    rec = np.empty((m, 7), dtype=np.int64)
    for t in range(m):
        r = fill[of[t]]
        fill[of[t]] += 1
        row[t] = r
        rec[r, XS] = xs[t]
        rec[r, XE] = xe[t]
    reset_links(rec)
    return table, first, row, rec


@njit(cache=True, nogil=True)
def match_events(table, first, rec, ev_room, ev_seq, ev_t, ev_s, ev_e, ev_k):  # pragma: no cover
    """Match each event (room, seq, stamp, slots, kind KIND_READ/KIND_ALLOC/KIND_FREE) to the transfers of its room
    whose slots it overlaps, through the room table. A read keeps the lowest seq per transfer; an
    alloc or free counts only below the read's seq and keeps the highest. So the events may come in
    any order when every read comes before every alloc and free (two passes), or all together in
    rising seq (one pass: a read's seq is then final for all later events, which lie above it)."""
    for i in range(ev_room.size):
        g = table[room_slot(table, ev_room[i]), 1]
        if g < 0:
            continue
        seq = ev_seq[i]
        for r in range(first[g], first[g + 1]):
            if not (rec[r, XS] < ev_e[i] and rec[r, XE] > ev_s[i] and seq < rec[r, RSEQ]):
                continue
            k = ev_k[i]
            if k == KIND_READ:
                rec[r, RSEQ] = seq
                rec[r, RTS] = ev_t[i]
            elif k == KIND_FREE:
                if seq > rec[r, FSEQ]:
                    rec[r, FSEQ] = seq
            elif seq > rec[r, ASEQ]:
                rec[r, ASEQ] = seq
                rec[r, ATS] = ev_t[i]


@njit(cache=True, nogil=True)
def links_of(rec, row):  # pragma: no cover
    """Each transfer's links in its own order: aseq, ats, rseq, rts, whether there is no alloc, no
    read, and whether it is ordinary (an alloc counts only before a read; no free in between)."""
    m = row.size
    aseq = np.empty(m, dtype=np.int64)
    ats = np.empty(m, dtype=np.int64)
    rseq = np.empty(m, dtype=np.int64)
    rts = np.empty(m, dtype=np.int64)
    no_alloc = np.empty(m, dtype=np.bool_)
    no_read = np.empty(m, dtype=np.bool_)
    ordinary = np.empty(m, dtype=np.bool_)
    for t in range(m):
        r = row[t]
        read = rec[r, RSEQ] != NONE_HI
        alloc = read and rec[r, ASEQ] != NONE_LO
        aseq[t] = rec[r, ASEQ]
        ats[t] = rec[r, ATS]
        rseq[t] = rec[r, RSEQ]
        rts[t] = rec[r, RTS]
        no_alloc[t] = not alloc
        no_read[t] = not read
        ordinary[t] = alloc and not rec[r, FSEQ] > rec[r, ASEQ]
    return aseq, ats, rseq, rts, no_alloc, no_read, ordinary

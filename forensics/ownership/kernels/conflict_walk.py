"""The unordered-transfer walk (forensics.ownership.steps.conflicts): each receiver's transfers in timeline
order against the set whose seq window is still open."""

from __future__ import annotations

from numba import njit

# columns of the open set (one row per open transfer)
SND, XSEQ, ROOM, START, END, SEQ_LO, SEQ_HI, LO, HI, TIMED = range(10)
FIELDS = 10
# columns of a result row: the earlier transfer (in timeline order), the later one, the overlap
OUT_FIELDS = 8


@njit(cache=True, nogil=True)
def conflict_walk(cols, first, open_, n_open, out):  # pragma: no cover
    """Compare transfers first.. of the chunk `cols` (FIELDS arrays in timeline order) with the open
    set `open_[:n_open]`, appending unordered overlapping pairs to `out`. Returns (next transfer to
    look at, open count, rows written); stops early when `out` or `open_` is full."""
    snd, xseq, room, start, end, seq_lo, seq_hi, lo, hi, timed = cols
    n_out = 0
    j = first
    while j < snd.size:
        if n_out + n_open > out.shape[0] or n_open == open_.shape[0]:
            return j, n_open, n_out
        i = 0
        while i < n_open:
            a = open_[i]
            if a[SEQ_HI] <= seq_lo[j]:  # a landed before event seq_hi <= seq_lo[j], j after it
                open_[i] = open_[n_open - 1]
                n_open -= 1
                continue
            i += 1
            if a[START] >= end[j] or start[j] >= a[END] or a[ROOM] == room[j]:
                continue  # disjoint slots, or one room's KV either way
            if a[SND] == snd[j]:
                if a[XSEQ] < xseq[j]:  # one sender's seq order, and the timeline agrees
                    continue
            elif a[TIMED] == 1 and timed[j] == 1 and a[HI] <= lo[j]:  # a's window ends before j's
                continue
            o = out[n_out]
            o[0], o[1], o[2] = a[SND], a[XSEQ], a[ROOM]
            o[3], o[4], o[5] = snd[j], xseq[j], room[j]
            o[6], o[7] = max(a[START], start[j]), min(a[END], end[j])
            n_out += 1
        row = open_[n_open]
        row[SND], row[XSEQ], row[ROOM], row[START], row[END] = snd[j], xseq[j], room[j], start[j], end[j]
        row[SEQ_LO], row[SEQ_HI], row[LO], row[HI], row[TIMED] = seq_lo[j], seq_hi[j], lo[j], hi[j], timed[j]
        n_open += 1
        j += 1
    return j, n_open, n_out

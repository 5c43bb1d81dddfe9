"""A model of a decode node's page allocator, replayed over the request lifecycle its logs describe
(forensics.findings.likelihood assembles the lifecycle and drives these walks).

SGLang logs no page index, so on a node without page telemetry the pages a request held can only be
inferred: the allocator is deterministic given the order of allocations and frees, and the logs give
that order up to their time resolution. A policy is the rule of the free list (its kernels and the
policies: forensics.ownership.kernels.freelist); this module replays it: over a node's lifecycle (walk),
over an instrumented node's batches for its score (policy_accuracy), over a sequence for the pages it hands
out (hand_out, the order the port of SGLang's allocators is held to).

A request's tokens fill its pages in the order the allocator handed them out (token t in its
t // page_size-th page); where the evidence names some of its pages, in ascending page order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.ownership.kernels.freelist import (
    DEFERRED,
    FIFO,
    LIFO,
    SORTED,
    ZERO,
    allocate,
    give_back,
    merge_if_short,
    new_state,
    put_back,
    take,
)

__all__ = ["DEFERRED", "FIFO", "LIFO", "SORTED", "hand_out", "new_state", "policy_accuracy", "walk"]

# the walk's event kinds, in the order a request goes through them on the decode node: steps of a
# request's lifecycle (LC_), not forensics.keys' op codes
LC_ALLOC_IN, LC_LAND, LC_READ, LC_END, LC_FREE = 0, 1, 2, 3, 4


@njit(cache=True)
def policy_accuracy(
    n_pages: int,
    pol: int,
    window: int,
    b_op: np.ndarray,
    b_ptr: np.ndarray,
    b_pages: np.ndarray,
    link: np.ndarray,
    bits: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    st: np.ndarray,
) -> tuple[int, int]:
    """Replay an instrumented node's allocation batches (b_op 0 alloc, 1 free; b_pages[b_ptr[i]:b_ptr[i+1]]
    its pages, in seq order): before each allocation the policy names the pages it would give; then the
    pool follows what the node really did. Returns (pages named right, pages allocated). DEFERRED:
    `window` is the merge slack (the free pages an allocation wants beyond its own)."""
    hit = 0
    total = 0
    want = np.zeros(n_pages + 1, dtype=np.bool_)
    pred = np.zeros(n_pages + 1, dtype=np.int32)
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    for b in range(len(b_op)):
        pages = b_pages[b_ptr[b] : b_ptr[b + 1]]
        if b_op[b] == 0:
            n = len(pages)
            merge_if_short(pol, link, bits, tier, released, st, n + window)
            got = allocate(pol, link, bits, tier, released, st, n, pred, ZERO)
            for p in pages:
                want[p] = True
            for j in range(got):
                if want[pred[j]]:
                    hit += 1
            total += n
            for p in pages:
                want[p] = False
            # back where they were (LIFO: the first named on top again), then the pages really
            # allocated leave the pool
            for j in range(got - 1, -1, -1):
                put_back(pol, link, bits, tier, st, pred[j])
            for p in pages:
                take(pol, link, bits, tier, st, p)
        else:
            m = 0
            for p in pages:
                if tier[p] == 0:  # a page the model already has free (events lost) is not freed twice
                    scratch[n_pages + window + m] = p
                    m += 1
            if m:
                fr = scratch[n_pages + window : n_pages + window + m].copy()
                give_back(pol, window, link, bits, tier, released, st, fr, scratch)
    return hit, total


@njit(cache=True)
def hand_out(
    n_pages: int, pol: int, window: int, b_op: np.ndarray, b_ptr: np.ndarray, b_pages: np.ndarray, b_want: np.ndarray
) -> np.ndarray:
    """The pages the policy hands out, in order, over a sequence of allocations (b_op 0: as many pages
    as b_pages[b_ptr[i]:b_ptr[i+1]] has room for; DEFERRED merges when fewer than b_want[i] are free)
    and frees (b_op 1: those pages, in that order). Returns b_pages with each allocation's pages
    filled in (0 where the pool ran dry): the order the port of SGLang's allocators is checked on."""
    link, bits, tier, released, st = new_state(n_pages)
    out = b_pages.copy()
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    for b in range(len(b_op)):
        lo, hi = b_ptr[b], b_ptr[b + 1]
        if b_op[b] == 0:
            merge_if_short(pol, link, bits, tier, released, st, b_want[b])
            got = allocate(pol, link, bits, tier, released, st, hi - lo, out, lo)
            out[lo + got : hi] = 0
        else:
            give_back(pol, window, link, bits, tier, released, st, b_pages[lo:hi].copy(), scratch)
    return out


# the walk's per-page helpers are inlined into it (numba inline="always"): a call per page, its arrays
# passed as structs, was a third of the walk's time (with the page rows below: 16 -> 8 µs per room walked)
@njit(cache=True, inline="always")
def _emit(pairs: np.ndarray, n: int, r: int, s: int) -> tuple[np.ndarray, int]:
    """Append (r, s) unless it repeats the last row (consecutive pages of one write or read)."""
    if n and pairs[n - 1, 0] == r and pairs[n - 1, 1] == s:
        return pairs, n
    if n == len(pairs):
        grown = np.zeros((2 * len(pairs), 2), dtype=np.int32)
        grown[:n] = pairs
        pairs = grown
    pairs[n, 0] = r
    pairs[n, 1] = s
    return pairs, n + 1


# what a page holds: a stack of (writer, fill) layers, each write covering the page's first `fill` slots
# (a request's tokens fill its pages from their first slot: transfers, decode output). A newer layer
# hides the older ones it covers, so fills fall from the bottom up; slot s holds the writer of the top
# layer whose fill exceeds s. Past DEPTH layers the oldest (the page's tail) is forgotten: those slots
# count as never written, which can only lose a pair, never invent one.
DEPTH = 6
# a page's state in the walk, one row of 16 int32 (64 bytes, a cache line): its layers' writers and fills,
# their depth, the room holding it and the watched room attending it; a page's touches then cost one line,
# not one per array (the pages a node's rooms cycle through outgrow the CPU's caches)
_W, _F, _D, _HOLDER, _ATTEND, _ROW = 0, DEPTH, 2 * DEPTH, 2 * DEPTH + 1, 2 * DEPTH + 2, 16


@njit(cache=True, inline="always")
def _write(
    page: np.ndarray, p: int | np.int64, fill: int, i: int, pairs: np.ndarray, n_pairs: int
) -> tuple[np.ndarray, int]:
    """Room i's KV into the first `fill` slots of page p; a watched room attending p receives it."""
    a = page[p, _ATTEND]
    if a >= 0 and a != i:
        pairs, n_pairs = _emit(pairs, n_pairs, a, i)
    d = page[p, _D]
    while d > 0 and page[p, _F + d - 1] <= fill:
        d -= 1
    if d == DEPTH:
        for k in range(DEPTH - 1):
            page[p, _W + k] = page[p, _W + k + 1]
            page[p, _F + k] = page[p, _F + k + 1]
        d -= 1
    page[p, _W + d] = i
    page[p, _F + d] = fill
    page[p, _D] = d + 1
    return pairs, n_pairs


@njit(cache=True, inline="always")
def _read(page: np.ndarray, p: int, extent: int, i: int, pairs: np.ndarray, n_pairs: int) -> tuple[np.ndarray, int]:
    """Room i attends the first `extent` slots of page p: every other writer of a layer it sees."""
    seen = 0
    for k in range(page[p, _D] - 1, -1, -1):
        if seen >= extent:
            break
        w = page[p, _W + k]
        if w != i:
            pairs, n_pairs = _emit(pairs, n_pairs, i, w)
        seen = page[p, _F + k]
    return pairs, n_pairs


@njit(cache=True, inline="always")
def _release(held: np.ndarray, lo: int, hi: int, i: int, page: np.ndarray, scratch: np.ndarray, at: int) -> int:
    """The pages of held[lo:hi] room i still holds, let go (into scratch[at:]); returns their count."""
    m = 0
    for j in range(lo, hi):
        p = held[j]
        if page[p, _HOLDER] == i:
            page[p, _HOLDER] = -1
            if page[p, _ATTEND] == i:
                page[p, _ATTEND] = -1
            scratch[at + m] = p
            m += 1
    return m


@njit(cache=True, nogil=True)
def walk(
    n_pages: int,
    ps: int,
    pol: int,
    window: int,
    ev_kind: np.ndarray,
    ev_room: np.ndarray,
    n_in: np.ndarray,
    n_read: np.ndarray,
    n_xfer: np.ndarray,
    n_out: np.ndarray,
    watch: np.ndarray,
    a_ptr: np.ndarray,
    a_pages: np.ndarray,
    x_ptr: np.ndarray,
    x_start: np.ndarray,
    x_end: np.ndarray,
) -> np.ndarray:
    """One replay of a node's request lifecycle: events (ev_kind, ev_room) in time order; per room
    n_in input pages allocated at pre-allocation, n_xfer tokens its transfer writes, n_read tokens
    decode attends, n_out output tokens written into pages allocated at decode start; a_pages the pages
    of its pre-allocation the evidence names (the prefill's transfer events) and x_start/x_end the
    exact slots its transfer wrote, where known. Returns (recipient, source) rows, repeated, for the
    watched rooms: a watched room attended a slot whose last write was the source's, or the source
    wrote a page it attended. The cost is the pages allocated, written and read, not their slots."""
    link, bits, tier, released, st = new_state(n_pages)
    rooms = len(n_in)
    out_pages = (n_out + ps - 1) // ps
    h_ptr = np.zeros(rooms + 1, dtype=np.int64)
    for i in range(rooms):
        h_ptr[i + 1] = h_ptr[i] + n_in[i] + out_pages[i]
    held = np.zeros(h_ptr[rooms], dtype=np.int32)
    got_in = np.zeros(rooms, dtype=np.int64)
    got_out = np.zeros(rooms, dtype=np.int64)
    page = np.zeros((n_pages + 1, _ROW), dtype=np.int32)
    page[:, _HOLDER] = -1
    page[:, _ATTEND] = -1  # the watched room attending the page
    spare = n_pages + window  # scratch[spare:] holds the pages being freed, scratch[:spare] _free's merge
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    pairs = np.zeros((1024, 2), dtype=np.int32)
    n_pairs = ZERO
    for e in range(len(ev_kind)):
        i = ev_room[e]
        kind = ev_kind[e]
        base = h_ptr[i]
        if kind == LC_ALLOC_IN:
            # the allocator saw the whole request, whatever part of its pages the evidence names;
            # DEFERRED merges as SGLang's pre-allocation does: alloc(n) on page size 1, alloc_extend of
            # the input's tokens (merge when tokens // page_size + 2 > free pages) on larger pages
            merge_if_short(pol, link, bits, tier, released, st, n_in[i] if ps == 1 else n_read[i] // ps + 2)
            cnt = 0
            for j in range(a_ptr[i], a_ptr[i + 1]):  # the pages the evidence names, wherever the model had them
                p = a_pages[j]
                q = page[p, _HOLDER]
                if q >= 0 and q != i and page[p, _ATTEND] == q:  # the model gave it to another: wrongly
                    page[p, _ATTEND] = -1
                take(pol, link, bits, tier, st, p)
                held[base + cnt] = p
                cnt += 1
            named = cnt
            cnt += allocate(pol, link, bits, tier, released, st, n_in[i] - cnt, held, base + cnt)
            if named:  # pages named by the evidence: their token order is not known, ascending
                held[base : base + cnt] = np.sort(held[base : base + cnt])
            for j in range(cnt):
                page[held[base + j], _HOLDER] = i
            got_in[i] = cnt
        elif kind == LC_LAND:
            if x_ptr[i + 1] > x_ptr[i]:
                for j in range(x_ptr[i], x_ptr[i + 1]):
                    for p in range(x_start[j] // ps, (x_end[j] - 1) // ps + 1):
                        fill = min(x_end[j], p * ps + ps) - p * ps
                        pairs, n_pairs = _write(page, p, fill, i, pairs, n_pairs)
            else:
                for j in range(min(got_in[i], (n_xfer[i] + ps - 1) // ps)):
                    fill = min(ps, n_xfer[i] - j * ps)
                    p = np.int64(held[base + j])  # int64 as the pages above: one type, one compile of _write
                    pairs, n_pairs = _write(page, p, fill, i, pairs, n_pairs)
        elif kind == LC_READ:
            if watch[i]:
                for j in range(min(got_in[i], (n_read[i] + ps - 1) // ps)):
                    p = held[base + j]
                    pairs, n_pairs = _read(page, p, min(ps, n_read[i] - j * ps), i, pairs, n_pairs)
                    page[p, _ATTEND] = i
            got_out[i] = allocate(pol, link, bits, tier, released, st, out_pages[i], held, base + got_in[i])
            for j in range(got_out[i]):
                page[held[base + got_in[i] + j], _HOLDER] = i
        else:  # LC_END writes the output and gives every page back; LC_FREE (an abort) gives the pre-allocation back
            if kind == LC_END:
                off = base + got_in[i]
                for j in range(got_out[i]):
                    p = np.int64(held[off + j])
                    if page[p, _HOLDER] == i:
                        fill = min(ps, n_out[i] - j * ps)
                        pairs, n_pairs = _write(page, p, fill, i, pairs, n_pairs)
            hi = base + got_in[i] + (got_out[i] if kind == LC_END else 0)
            m = _release(held, base, hi, i, page, scratch, spare)
            if m:
                fr = scratch[spare : spare + m].copy()
                give_back(pol, window, link, bits, tier, released, st, fr, scratch)
    return pairs[:n_pairs]

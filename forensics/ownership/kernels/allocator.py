"""A model of a decode node's page allocator, replayed over the request lifecycle its logs describe
(forensics.findings.likelihood assembles the lifecycle and drives these walks).

SGLang logs no page index, so on a node without page telemetry the pages a request held can only be
inferred: the allocator is deterministic given the order of allocations and frees, and the logs give
that order up to their time resolution. A policy is the rule of the free list; which one each SGLang
release runs, per page size and PD mode, is forensics.engines.sglang_allocator.rule() (the port of
SGLang's allocators, differentially tested against them; tests/ownership/test_allocator.py checks
these walks hand out the port's pages in the port's order):

- FIFO: freed pages join at the bottom, in the order freed; allocations take from the top (SGLang's
  TokenToKVPoolAllocator, page size 1, without need_sort: free appends to free_pages).
- LIFO: freed pages go on top, the lowest page first (SGLang's PagedTokenToKVPoolAllocator without
  need_sort prepends torch.unique of the freed pages and allocates from the front). With a
  coalescing window w > 0, the freed pages are merged with the top max(w, 2 x freed) free pages and
  the merged run re-sorted (a rule no SGLang release runs, kept for the simulator's old `coalesce`).
- SORTED: the lowest free page always goes out first (no SGLang release either).
- DEFERRED: SGLang 0.5.4+ in PD mode (need_sort): freed pages wait in release_pages and join
  free_pages, sorted, only when an allocation finds free_pages too short (merge_and_sort_free). Short
  means fewer free pages than the allocation wants plus a slack: `window` in policy_accuracy (page
  size > 1: alloc_extend wants extend_num_tokens // page_size + 2 pages of a one-request batch, one
  more than it takes for a length that is not a page multiple); the walk knows each pre-allocation's
  token count and applies SGLang's own test.

A request's tokens fill its pages in the order the allocator handed them out (token t in its
t // page_size-th page); where the evidence names some of its pages, in ascending page order.

The LIFO free list is a doubly linked list of pages (index 0 its sentinel), the sorted ones a bitmap
scanned from the lowest free page: an allocation or a free costs its pages, whatever the pool's size.
A request's pages hold its tokens in ascending page order (token t in page t // page_size). Pages are
numbered from 1 (page 0 is SGLang's padding page).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numba import njit

LIFO, SORTED, DEFERRED, FIFO = 0, 1, 2, 3
# the walk's event kinds, in the order a request goes through them on the decode node: steps of a
# request's lifecycle (LC_), not forensics.keys' op codes
LC_ALLOC_IN, LC_LAND, LC_READ, LC_END, LC_FREE = 0, 1, 2, 3, 4
# st: the allocator's scalar state: free pages, released pages listed, the lowest page that may be free
_AVAIL, _RELEASED, _HINT = 0, 1, 2
_NEXT, _PREV = 0, 1  # rows of link
_ONE = np.uint64(1)
# the int 0 handed to a compiled callee: a literal 0 is a type of its own to numba, one more compile of it
_ZERO = cast(int, np.int64(0))


@njit(cache=True)
def new_state(n_pages: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A pool of pages 1..n_pages, all free, the lowest first (SGLang's initial free_pages order):
    (link, bits, tier, released, st)."""
    link = np.zeros((2, n_pages + 1), dtype=np.int32)
    bits = np.zeros(n_pages // 64 + 1, dtype=np.uint64)
    tier = np.zeros(n_pages + 1, dtype=np.int8)  # 0 held, 1 free, 2 released (DEFERRED)
    released = np.zeros(n_pages + 1, dtype=np.int32)
    st = np.zeros(3, dtype=np.int64)
    _init(link, bits, tier, st)
    return link, bits, tier, released, st


@njit(cache=True)
def _init(link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray) -> None:
    n = len(tier) - 1
    for p in range(n, 0, -1):
        _push_head(link, p)
        bits[p >> 6] |= _ONE << np.uint64(p & 63)
        tier[p] = 1
    st[_AVAIL] = n
    st[_HINT] = 1


@njit(cache=True, inline="always")
def _push_head(link: np.ndarray, p: int) -> None:
    h = link[_NEXT, 0]
    link[_NEXT, p] = h
    link[_PREV, p] = 0
    link[_PREV, h] = p
    link[_NEXT, 0] = p


@njit(cache=True, inline="always")
def _push_tail(link: np.ndarray, p: int) -> None:
    t = link[_PREV, 0]
    link[_PREV, p] = t
    link[_NEXT, p] = 0
    link[_NEXT, t] = p
    link[_PREV, 0] = p


@njit(cache=True, inline="always")
def _unlink(link: np.ndarray, p: int) -> None:
    n = link[_NEXT, p]
    q = link[_PREV, p]
    link[_NEXT, q] = n
    link[_PREV, n] = q


@njit(cache=True, inline="always")
def _set_free(pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray, p: int) -> None:
    """Page p joins the free list (LIFO: on top; FIFO: at the bottom)."""
    if pol == LIFO:
        _push_head(link, p)
    elif pol == FIFO:
        _push_tail(link, p)
    else:
        bits[p >> 6] |= _ONE << np.uint64(p & 63)
        if p < st[_HINT]:
            st[_HINT] = p
    tier[p] = 1
    st[_AVAIL] += 1


@njit(cache=True)
def _put_back(pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray, p: int) -> None:
    """Undo the allocation of page p (the allocations undone last first): back on top of the list."""
    if pol == FIFO:
        _push_head(link, p)
        tier[p] = 1
        st[_AVAIL] += 1
    else:
        _set_free(pol, link, bits, tier, st, p)


@njit(cache=True)
def _take(pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray, p: int) -> None:
    """Page p leaves the pool, wherever the model had it (a page the evidence says was allocated)."""
    if tier[p] == 1:
        if pol == LIFO or pol == FIFO:
            _unlink(link, p)
        else:
            bits[p >> 6] &= ~(_ONE << np.uint64(p & 63))
        st[_AVAIL] -= 1
    tier[p] = 0  # a released page's entry in `released` is skipped at the merge


@njit(cache=True)
def _merge_if_short(
    pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, released: np.ndarray, st: np.ndarray, n: int
) -> None:
    """DEFERRED: an allocation that wants n free pages and finds fewer merges the released pages in."""
    if pol == DEFERRED and st[_AVAIL] < n:
        for j in range(st[_RELEASED]):
            p = released[j]
            if tier[p] == 2:
                _set_free(pol, link, bits, tier, st, p)
        st[_RELEASED] = 0


@njit(cache=True)
def _alloc(
    pol: int,
    link: np.ndarray,
    bits: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    st: np.ndarray,
    n: int,
    out: np.ndarray,
    at: int,
) -> int:
    """n pages into out[at:], by the policy; returns how many it found (fewer when the pool runs dry)."""
    _merge_if_short(pol, link, bits, tier, released, st, n)
    got = 0
    if pol == LIFO or pol == FIFO:
        while got < n:
            p = link[_NEXT, 0]
            if p == 0:
                break
            _unlink(link, p)
            tier[p] = 0
            out[at + got] = p
            got += 1
    else:
        w = st[_HINT] >> 6
        while got < n and w < len(bits):
            word = bits[w]
            while word and got < n:
                low = word & (~word + _ONE)
                p = w * 64 + int(np.log2(np.float64(low)))  # exact: low is a power of two
                word ^= low
                tier[p] = 0
                out[at + got] = p
                got += 1
            bits[w] = word
            if word == 0:
                w += 1
        st[_HINT] = w * 64
    st[_AVAIL] -= got
    return got


@njit(cache=True)
def _compact_released(st: np.ndarray, tier: np.ndarray, released: np.ndarray) -> None:
    """Keep each page still released once (a page taken from release_pages by the evidence, then freed
    again, is listed twice)."""
    n = 0
    for j in range(st[_RELEASED]):
        p = released[j]
        if tier[p] == 2:
            tier[p] = 3
            released[n] = p
            n += 1
    for j in range(n):
        tier[released[j]] = 2
    st[_RELEASED] = n


@njit(cache=True)
def _free(
    pol: int,
    window: int,
    link: np.ndarray,
    bits: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    st: np.ndarray,
    pages: np.ndarray,
    scratch: np.ndarray,
) -> None:
    """Give `pages` (held) back to the pool by the policy."""
    m = len(pages)
    if pol == FIFO:  # appended in the order freed, no sort (SGLang frees a request's slots in token order)
        for p in pages:
            _set_free(pol, link, bits, tier, st, p)
        return
    if pol == SORTED:
        for p in pages:
            _set_free(pol, link, bits, tier, st, p)
        return
    if pol == DEFERRED:
        for p in pages:
            if st[_RELEASED] == len(released):
                _compact_released(st, tier, released)
            tier[p] = 2
            released[st[_RELEASED]] = p
            st[_RELEASED] += 1
        return
    k = 0
    if window > 0:  # coalesce with the top of the free stack
        k = _alloc(pol, link, bits, tier, released, st, min(st[_AVAIL], max(window, 2 * m)), scratch, _ZERO)
    scratch[k : k + m] = pages
    run = np.sort(scratch[: k + m])
    for j in range(k + m - 1, -1, -1):  # the lowest page on top
        _set_free(pol, link, bits, tier, st, run[j])


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
            _merge_if_short(pol, link, bits, tier, released, st, n + window)
            got = _alloc(pol, link, bits, tier, released, st, n, pred, _ZERO)
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
                _put_back(pol, link, bits, tier, st, pred[j])
            for p in pages:
                _take(pol, link, bits, tier, st, p)
        else:
            m = 0
            for p in pages:
                if tier[p] == 0:  # a page the model already has free (events lost) is not freed twice
                    scratch[n_pages + window + m] = p
                    m += 1
            if m:
                fr = scratch[n_pages + window : n_pages + window + m].copy()
                _free(pol, window, link, bits, tier, released, st, fr, scratch)
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
            _merge_if_short(pol, link, bits, tier, released, st, b_want[b])
            got = _alloc(pol, link, bits, tier, released, st, hi - lo, out, lo)
            out[lo + got : hi] = 0
        else:
            _free(pol, window, link, bits, tier, released, st, b_pages[lo:hi].copy(), scratch)
    return out


@njit(cache=True)
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


@njit(cache=True)
def _write(
    lw: np.ndarray, lf: np.ndarray, ld: np.ndarray, page_attend: np.ndarray, p: int | np.int64, fill: int, i: int,
    pairs: np.ndarray, n_pairs: int,
) -> tuple[np.ndarray, int]:  # fmt: skip
    """Room i's KV into the first `fill` slots of page p; a watched room attending p receives it."""
    a = page_attend[p]
    if a >= 0 and a != i:
        pairs, n_pairs = _emit(pairs, n_pairs, a, i)
    d = ld[p]
    while d > 0 and lf[p, d - 1] <= fill:
        d -= 1
    if d == DEPTH:
        lw[p, : DEPTH - 1] = lw[p, 1:]
        lf[p, : DEPTH - 1] = lf[p, 1:]
        d -= 1
    lw[p, d] = i
    lf[p, d] = fill
    ld[p] = d + 1
    return pairs, n_pairs


@njit(cache=True)
def _read(
    lw: np.ndarray, lf: np.ndarray, ld: np.ndarray, p: int, extent: int, i: int, pairs: np.ndarray, n_pairs: int
) -> tuple[np.ndarray, int]:
    """Room i attends the first `extent` slots of page p: every other writer of a layer it sees."""
    seen = 0
    for k in range(ld[p] - 1, -1, -1):
        if seen >= extent:
            break
        w = lw[p, k]
        if w != i:
            pairs, n_pairs = _emit(pairs, n_pairs, i, w)
        seen = lf[p, k]
    return pairs, n_pairs


@njit(cache=True)
def _release(
    held: np.ndarray, lo: int, hi: int, i: int, holder: np.ndarray, page_attend: np.ndarray, scratch: np.ndarray,
    at: int,
) -> int:  # fmt: skip
    """The pages of held[lo:hi] room i still holds, let go (into scratch[at:]); returns their count."""
    m = 0
    for j in range(lo, hi):
        p = held[j]
        if holder[p] == i:
            holder[p] = -1
            if page_attend[p] == i:
                page_attend[p] = -1
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
    holder = np.full(n_pages + 1, -1, dtype=np.int32)
    lw = np.zeros((n_pages + 1, DEPTH), dtype=np.int32)
    lf = np.zeros((n_pages + 1, DEPTH), dtype=np.int32)
    ld = np.zeros(n_pages + 1, dtype=np.int8)
    page_attend = np.full(n_pages + 1, -1, dtype=np.int32)  # the watched room attending the page
    spare = n_pages + window  # scratch[spare:] holds the pages being freed, scratch[:spare] _free's merge
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    pairs = np.zeros((1024, 2), dtype=np.int32)
    n_pairs = _ZERO
    for e in range(len(ev_kind)):
        i = ev_room[e]
        kind = ev_kind[e]
        base = h_ptr[i]
        if kind == LC_ALLOC_IN:
            # the allocator saw the whole request, whatever part of its pages the evidence names;
            # DEFERRED merges as SGLang's pre-allocation does: alloc(n) on page size 1, alloc_extend of
            # the input's tokens (merge when tokens // page_size + 2 > free pages) on larger pages
            _merge_if_short(pol, link, bits, tier, released, st, n_in[i] if ps == 1 else n_read[i] // ps + 2)
            cnt = 0
            for j in range(a_ptr[i], a_ptr[i + 1]):  # the pages the evidence names, wherever the model had them
                p = a_pages[j]
                q = holder[p]
                if q >= 0 and q != i and page_attend[p] == q:  # the model gave it to another: wrongly
                    page_attend[p] = -1
                _take(pol, link, bits, tier, st, p)
                held[base + cnt] = p
                cnt += 1
            named = cnt
            cnt += _alloc(pol, link, bits, tier, released, st, n_in[i] - cnt, held, base + cnt)
            if named:  # pages named by the evidence: their token order is not known, ascending
                held[base : base + cnt] = np.sort(held[base : base + cnt])
            for j in range(cnt):
                holder[held[base + j]] = i
            got_in[i] = cnt
        elif kind == LC_LAND:
            if x_ptr[i + 1] > x_ptr[i]:
                for j in range(x_ptr[i], x_ptr[i + 1]):
                    for p in range(x_start[j] // ps, (x_end[j] - 1) // ps + 1):
                        fill = min(x_end[j], p * ps + ps) - p * ps
                        pairs, n_pairs = _write(lw, lf, ld, page_attend, p, fill, i, pairs, n_pairs)
            else:
                for j in range(min(got_in[i], (n_xfer[i] + ps - 1) // ps)):
                    fill = min(ps, n_xfer[i] - j * ps)
                    p = np.int64(held[base + j])  # int64 as the pages above: one type, one compile of _write
                    pairs, n_pairs = _write(lw, lf, ld, page_attend, p, fill, i, pairs, n_pairs)
        elif kind == LC_READ:
            if watch[i]:
                for j in range(min(got_in[i], (n_read[i] + ps - 1) // ps)):
                    p = held[base + j]
                    pairs, n_pairs = _read(lw, lf, ld, p, min(ps, n_read[i] - j * ps), i, pairs, n_pairs)
                    page_attend[p] = i
            got_out[i] = _alloc(pol, link, bits, tier, released, st, out_pages[i], held, base + got_in[i])
            for j in range(got_out[i]):
                holder[held[base + got_in[i] + j]] = i
        else:  # LC_END writes the output and gives every page back; LC_FREE (an abort) gives the pre-allocation back
            if kind == LC_END:
                off = base + got_in[i]
                for j in range(got_out[i]):
                    p = np.int64(held[off + j])
                    if holder[p] == i:
                        fill = min(ps, n_out[i] - j * ps)
                        pairs, n_pairs = _write(lw, lf, ld, page_attend, p, fill, i, pairs, n_pairs)
            hi = base + got_in[i] + (got_out[i] if kind == LC_END else 0)
            m = _release(held, base, hi, i, holder, page_attend, scratch, spare)
            if m:
                fr = scratch[spare : spare + m].copy()
                _free(pol, window, link, bits, tier, released, st, fr, scratch)
    return pairs[:n_pairs]

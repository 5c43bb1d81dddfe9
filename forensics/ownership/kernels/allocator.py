"""A model of a decode node's page allocator, replayed over the request lifecycle its logs describe
(forensics.findings.likelihood assembles the lifecycle and drives these walks).

SGLang logs no page index, so on a node without page telemetry the pages a request held can only be
inferred: the allocator is deterministic given the order of allocations and frees, and the logs give
that order up to their time resolution. The free list is a max-heap of (key, page) with lazy deletion
(an entry is live while the page is free and its key is the page's current key); a policy is the rule
that gives freed pages their keys:

- LIFO: freed pages go on top, the lowest page first (SGLang 0.4.9 prepends the freed pages, sorted by
  torch.unique, to free_pages and allocates from the front). With a coalescing window w > 0, the freed
  pages are merged with the top max(w, 2 x freed) free pages and the merged run re-sorted, which keeps
  neighbouring free pages together (allocators that coalesce their free lists).
- SORTED: the lowest free page always goes out first.
- DEFERRED: SGLang 0.5.4+ in PD mode: freed pages wait in release_pages and join free_pages, sorted,
  only when an allocation finds free_pages too short (allocator.merge_and_sort_free).

A request's pages hold its tokens in ascending page order (token t in page t // page_size). Pages are
numbered from 1 (page 0 is SGLang's padding page).
"""

from __future__ import annotations

import numpy as np
from numba import njit

LIFO, SORTED, DEFERRED = 0, 1, 2
# the walk's event kinds, in the order a request goes through them on the decode node
ALLOC_IN, LAND, READ, END, FREE = 0, 1, 2, 3, 4
# st: the allocator's scalar state
_HEAP_N, _COUNTER, _AVAIL, _RELEASED = 0, 1, 2, 3


_VERSION = 0xFFFFF  # low bits of a lowest-first key: a page's entries of different frees differ


@njit(cache=True)
def _lowest_first(key: np.ndarray, p: int) -> int:
    """A key that puts page p after every lower page and differs from p's previous key, so an entry of
    an earlier free (left in the heap when the page was taken) is never live again."""
    return -(p << 20) + ((key[p] + 1) & _VERSION)


@njit(cache=True)
def _push(hk: np.ndarray, hp: np.ndarray, st: np.ndarray, k: int, p: int) -> None:
    i = st[_HEAP_N]
    st[_HEAP_N] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if hk[parent] >= k:
            break
        hk[i], hp[i] = hk[parent], hp[parent]
        i = parent
    hk[i], hp[i] = k, p


@njit(cache=True)
def _pop(hk: np.ndarray, hp: np.ndarray, st: np.ndarray) -> int:
    """The page of the top entry, removed from the heap (live or not)."""
    top = hp[0]
    n = st[_HEAP_N] - 1
    st[_HEAP_N] = n
    k, p = hk[n], hp[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[c + 1] > hk[c]:
            c += 1
        if hk[c] <= k:
            break
        hk[i], hp[i] = hk[c], hp[c]
        i = c
    if n > 0:
        hk[i], hp[i] = k, p
    return top


@njit(cache=True)
def _rebuild(hk: np.ndarray, hp: np.ndarray, st: np.ndarray, key: np.ndarray, tier: np.ndarray) -> None:
    """Drop the dead entries: the heap anew from the free pages."""
    st[_HEAP_N] = 0
    for p in range(1, len(tier)):
        if tier[p] == 1:
            _push(hk, hp, st, key[p], p)


@njit(cache=True)
def _add(hk: np.ndarray, hp: np.ndarray, st: np.ndarray, key: np.ndarray, tier: np.ndarray, p: int, k: int) -> None:
    if st[_HEAP_N] == len(hk):
        _rebuild(hk, hp, st, key, tier)
    key[p] = k
    tier[p] = 1
    st[_AVAIL] += 1
    _push(hk, hp, st, k, p)


@njit(cache=True)
def _pop_free(hk: np.ndarray, hp: np.ndarray, st: np.ndarray, key: np.ndarray, tier: np.ndarray) -> int:
    """The free page with the highest key, taken (tier 0); -1 when none is free."""
    while st[_HEAP_N] > 0:
        k = hk[0]
        p = _pop(hk, hp, st)
        if tier[p] == 1 and key[p] == k:
            tier[p] = 0
            st[_AVAIL] -= 1
            return p
    return -1


def new_state(n_pages: int) -> tuple[np.ndarray, ...]:
    """A pool of pages 1..n_pages, all free, the lowest first (SGLang's initial free_pages order)."""
    key = np.zeros(n_pages + 1, dtype=np.int64)
    tier = np.zeros(n_pages + 1, dtype=np.int8)  # 0 held, 1 free, 2 released (DEFERRED)
    cap = 4 * n_pages + 64
    hk = np.zeros(cap, dtype=np.int64)
    hp = np.zeros(cap, dtype=np.int32)
    released = np.zeros(n_pages + 1, dtype=np.int32)
    st = np.zeros(4, dtype=np.int64)
    _init(hk, hp, st, key, tier)
    return hk, hp, st, key, tier, released


@njit(cache=True)
def _init(hk: np.ndarray, hp: np.ndarray, st: np.ndarray, key: np.ndarray, tier: np.ndarray) -> None:
    for p in range(1, len(tier)):
        _add(hk, hp, st, key, tier, p, _lowest_first(key, p))


@njit(cache=True)
def _merge_if_short(
    hk: np.ndarray,
    hp: np.ndarray,
    st: np.ndarray,
    key: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    pol: int,
    n: int,
) -> None:
    """DEFERRED: an allocation of n pages that finds fewer free merges the released pages in."""
    if pol == DEFERRED and st[_AVAIL] < n:
        for j in range(st[_RELEASED]):
            p = released[j]
            if tier[p] == 2:
                _add(hk, hp, st, key, tier, p, _lowest_first(key, p))
        st[_RELEASED] = 0


@njit(cache=True)
def _alloc(
    hk: np.ndarray,
    hp: np.ndarray,
    st: np.ndarray,
    key: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    pol: int,
    n: int,
    out: np.ndarray,
    at: int,
) -> int:
    """n pages into out[at:], by the policy; returns how many it found (fewer when the pool runs dry)."""
    _merge_if_short(hk, hp, st, key, tier, released, pol, n)
    got = 0
    while got < n:
        p = _pop_free(hk, hp, st, key, tier)
        if p < 0:
            break
        out[at + got] = p
        got += 1
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
    hk: np.ndarray,
    hp: np.ndarray,
    st: np.ndarray,
    key: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
    pol: int,
    window: int,
    pages: np.ndarray,
    scratch: np.ndarray,
) -> None:
    """Give `pages` (held) back to the pool by the policy."""
    m = len(pages)
    if pol == SORTED:
        for p in pages:
            _add(hk, hp, st, key, tier, p, _lowest_first(key, p))
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
        k = min(st[_AVAIL], max(window, 2 * m))
    for j in range(k):
        scratch[j] = _pop_free(hk, hp, st, key, tier)
    scratch[k : k + m] = pages
    run = np.sort(scratch[: k + m])
    c = st[_COUNTER] + k + m
    st[_COUNTER] = c
    for j in range(k + m):  # the lowest page on top
        _add(hk, hp, st, key, tier, run[j], c - j)


@njit(cache=True)
def _take(st: np.ndarray, tier: np.ndarray, p: int) -> None:
    """Page p leaves the pool, wherever the model had it (a page the evidence says was allocated)."""
    if tier[p] == 1:
        st[_AVAIL] -= 1
    tier[p] = 0


@njit(cache=True)
def policy_accuracy(
    n_pages: int,
    pol: int,
    window: int,
    b_op: np.ndarray,
    b_ptr: np.ndarray,
    b_pages: np.ndarray,
    hk: np.ndarray,
    hp: np.ndarray,
    st: np.ndarray,
    key: np.ndarray,
    tier: np.ndarray,
    released: np.ndarray,
) -> tuple[int, int]:
    """Replay an instrumented node's allocation batches (b_op 0 alloc, 1 free; b_pages[b_ptr[i]:b_ptr[i+1]]
    its pages, in seq order): before each allocation the policy names the pages it would give; then the
    pool follows what the node really did. Returns (pages named right, pages allocated)."""
    hit = 0
    total = 0
    want = np.zeros(n_pages + 1, dtype=np.bool_)
    pred = np.zeros(n_pages + 1, dtype=np.int32)
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    for b in range(len(b_op)):
        pages = b_pages[b_ptr[b] : b_ptr[b + 1]]
        if b_op[b] == 0:
            n = len(pages)
            got = _alloc(hk, hp, st, key, tier, released, pol, n, pred, 0)
            for p in pages:
                want[p] = True
            for j in range(got):
                if want[pred[j]]:
                    hit += 1
            total += n
            for p in pages:
                want[p] = False
            # back to the pool with their keys, then the pages really allocated leave it
            for j in range(got):
                _add(hk, hp, st, key, tier, pred[j], key[pred[j]])
            for p in pages:
                _take(st, tier, p)
        else:
            m = 0
            for p in pages:
                if tier[p] == 0:  # a page the model already has free (events lost) is not freed twice
                    scratch[n_pages + window + m] = p
                    m += 1
            if m:
                fr = scratch[n_pages + window : n_pages + window + m].copy()
                _free(hk, hp, st, key, tier, released, pol, window, fr, scratch)
    return hit, total


@njit(cache=True)
def _emit(pairs: np.ndarray, n: int, r: int, s: int) -> np.ndarray:
    if n == len(pairs):
        grown = np.zeros((2 * len(pairs), 2), dtype=np.int32)
        grown[:n] = pairs
        pairs = grown
    pairs[n, 0] = r
    pairs[n, 1] = s
    return pairs


@njit(cache=True)
def _write(
    content: np.ndarray,
    attend: np.ndarray,
    page_attend: np.ndarray,
    ps: int,
    lo: int,
    hi: int,
    i: int,
    pairs: np.ndarray,
    n_pairs: int,
) -> tuple[np.ndarray, int]:
    """Room i's KV into slots [lo, hi); a watched room attending one of them receives it. Slot by slot
    only in the pages a watched room attends (page_attend), else as one fill."""
    last = -1
    p0 = lo // ps
    p1 = (hi - 1) // ps
    for p in range(p0, p1 + 1):
        a0 = max(lo, p * ps)
        a1 = min(hi, p * ps + ps)
        if page_attend[p] < 0:
            content[a0:a1] = i
            continue
        for s in range(a0, a1):
            a = attend[s]
            if a >= 0 and a != i and a != last:
                pairs = _emit(pairs, n_pairs, a, i)
                n_pairs += 1
                last = a
            content[s] = i
    return pairs, n_pairs


@njit(cache=True)
def _release(
    held: np.ndarray,
    lo: int,
    hi: int,
    i: int,
    holder: np.ndarray,
    attend: np.ndarray,
    page_attend: np.ndarray,
    ps: int,
    scratch: np.ndarray,
    at: int,
) -> int:
    """The pages of held[lo:hi] room i still holds, let go (into scratch[at:]); returns their count."""
    m = 0
    for j in range(lo, hi):
        p = held[j]
        if holder[p] == i:
            holder[p] = -1
            _unattend(attend, page_attend, ps, p, i)
            scratch[at + m] = p
            m += 1
    return m


@njit(cache=True)
def _unattend(attend: np.ndarray, page_attend: np.ndarray, ps: int, p: int, q: int) -> None:
    """Room q no longer attends page p."""
    if page_attend[p] == q:
        page_attend[p] = -1
        for s in range(p * ps, p * ps + ps):
            if attend[s] == q:
                attend[s] = -1


@njit(cache=True)
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
    exact slots its transfer wrote, where known. Returns (recipient, source) rows for the watched
    rooms: a watched room attended a slot whose last write was the source's, or the source wrote a
    slot it attended. Only watched rooms' attention is tracked: the cost is the slots written plus
    the slots the watched rooms read."""
    hk = np.zeros(4 * n_pages + 64, dtype=np.int64)
    hp = np.zeros(4 * n_pages + 64, dtype=np.int32)
    st = np.zeros(4, dtype=np.int64)
    key = np.zeros(n_pages + 1, dtype=np.int64)
    tier = np.zeros(n_pages + 1, dtype=np.int8)
    released = np.zeros(n_pages + 1, dtype=np.int32)
    _init(hk, hp, st, key, tier)
    rooms = len(n_in)
    out_pages = (n_out + ps - 1) // ps
    h_ptr = np.zeros(rooms + 1, dtype=np.int64)
    for i in range(rooms):
        h_ptr[i + 1] = h_ptr[i] + n_in[i] + out_pages[i]
    held = np.zeros(h_ptr[rooms], dtype=np.int32)
    got_in = np.zeros(rooms, dtype=np.int64)
    got_out = np.zeros(rooms, dtype=np.int64)
    holder = np.full(n_pages + 1, -1, dtype=np.int32)
    content = np.full((n_pages + 1) * ps, -1, dtype=np.int32)
    attend = np.full((n_pages + 1) * ps, -1, dtype=np.int32)
    page_attend = np.full(n_pages + 1, -1, dtype=np.int32)  # the watched room attending the page (one at a time)
    spare = n_pages + window  # scratch[spare:] holds the pages being freed, scratch[:spare] _free's merge
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    pairs = np.zeros((1024, 2), dtype=np.int32)
    n_pairs = 0
    for e in range(len(ev_kind)):
        i = ev_room[e]
        kind = ev_kind[e]
        base = h_ptr[i]
        if kind == ALLOC_IN:
            # the allocator saw the whole request, whatever part of its pages the evidence names
            _merge_if_short(hk, hp, st, key, tier, released, pol, n_in[i])
            cnt = 0
            for j in range(a_ptr[i], a_ptr[i + 1]):  # the pages the evidence names, wherever the model had them
                p = a_pages[j]
                q = holder[p]
                if q >= 0 and q != i:  # the model gave it to another: that was wrong, it is this room's
                    _unattend(attend, page_attend, ps, p, q)
                _take(st, tier, p)
                held[base + cnt] = p
                cnt += 1
            cnt += _alloc(hk, hp, st, key, tier, released, pol, n_in[i] - cnt, held, base + cnt)
            held[base : base + cnt] = np.sort(held[base : base + cnt])
            for j in range(cnt):
                holder[held[base + j]] = i
            got_in[i] = cnt
        elif kind == LAND:
            if x_ptr[i + 1] > x_ptr[i]:
                for j in range(x_ptr[i], x_ptr[i + 1]):
                    pairs, n_pairs = _write(content, attend, page_attend, ps, x_start[j], x_end[j], i, pairs, n_pairs)
            else:
                for j in range(min(got_in[i], (n_xfer[i] + ps - 1) // ps)):
                    lo = held[base + j] * ps
                    pairs, n_pairs = _write(
                        content, attend, page_attend, ps, lo, lo + min(ps, n_xfer[i] - j * ps), i, pairs, n_pairs
                    )
        elif kind == READ:
            if watch[i]:
                last = -1
                for j in range(min(got_in[i], (n_read[i] + ps - 1) // ps)):
                    lo = held[base + j] * ps
                    page_attend[held[base + j]] = i
                    for s in range(lo, lo + min(ps, n_read[i] - j * ps)):
                        c = content[s]
                        if c >= 0 and c != i and c != last:
                            pairs = _emit(pairs, n_pairs, i, c)
                            n_pairs += 1
                            last = c
                        attend[s] = i
            got_out[i] = _alloc(hk, hp, st, key, tier, released, pol, out_pages[i], held, base + got_in[i])
            for j in range(got_out[i]):
                holder[held[base + got_in[i] + j]] = i
        else:  # END writes the output and gives every page back; FREE (an abort) gives the pre-allocation back
            if kind == END:
                off = base + got_in[i]
                for j in range(got_out[i]):
                    lo = held[off + j] * ps
                    pairs, n_pairs = _write(
                        content, attend, page_attend, ps, lo, lo + min(ps, n_out[i] - j * ps), i, pairs, n_pairs
                    )
            hi = base + got_in[i] + (got_out[i] if kind == END else 0)
            m = _release(held, base, hi, i, holder, attend, page_attend, ps, scratch, spare)
            if m:
                fr = scratch[spare : spare + m].copy()
                _free(hk, hp, st, key, tier, released, pol, window, fr, scratch)
    return pairs[:n_pairs]

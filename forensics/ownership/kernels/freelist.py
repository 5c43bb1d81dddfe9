"""The allocator model's free list: a decode node's pool of pages and the rule it hands them out and
takes them back by (the policy), as compiled kernels the replays of forensics.ownership.kernels.allocator
drive.

Which policy each SGLang release runs, per page size and PD mode, is
forensics.engines.sglang_allocator.rule() (the port of SGLang's allocators, differentially tested against
them; tests/ownership/test_allocator.py checks these kernels hand out the port's pages in the port's order):

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

The LIFO and FIFO free list is a doubly linked list of pages (index 0 its sentinel), the sorted ones a
bitmap scanned from the lowest free page: an allocation or a free costs its pages, whatever the pool's
size. Pages are numbered from 1 (page 0 is SGLang's padding page).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numba import njit

LIFO, SORTED, DEFERRED, FIFO = 0, 1, 2, 3
# st: the allocator's scalar state: free pages, released pages listed, the lowest page that may be free
_AVAIL, _RELEASED, _HINT = 0, 1, 2
_NEXT, _PREV = 0, 1  # rows of link
_ONE = np.uint64(1)
# the int 0 handed to a compiled callee: a literal 0 is a type of its own to numba, one more compile of it
ZERO = cast(int, np.int64(0))


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
def put_back(pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray, p: int) -> None:
    """Undo the allocation of page p (the allocations undone last first): back on top of the list."""
    if pol == FIFO:
        _push_head(link, p)
        tier[p] = 1
        st[_AVAIL] += 1
    else:
        _set_free(pol, link, bits, tier, st, p)


@njit(cache=True)
def take(pol: int, link: np.ndarray, bits: np.ndarray, tier: np.ndarray, st: np.ndarray, p: int) -> None:
    """Page p leaves the pool, wherever the model had it (a page the evidence says was allocated)."""
    if tier[p] == 1:
        if pol == LIFO or pol == FIFO:
            _unlink(link, p)
        else:
            bits[p >> 6] &= ~(_ONE << np.uint64(p & 63))
        st[_AVAIL] -= 1
    tier[p] = 0  # a released page's entry in `released` is skipped at the merge


@njit(cache=True)
def merge_if_short(
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
def allocate(
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
    merge_if_short(pol, link, bits, tier, released, st, n)
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
def give_back(
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
        k = allocate(pol, link, bits, tier, released, st, min(st[_AVAIL], max(window, 2 * m)), scratch, ZERO)
    scratch[k : k + m] = pages
    run = np.sort(scratch[: k + m])
    for j in range(k + m - 1, -1, -1):  # the lowest page on top
        _set_free(pol, link, bits, tier, st, run[j])

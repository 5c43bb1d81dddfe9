"""The realistic generator's compiled helpers (the loop: forensics.simulate.pages.loop): the event
heap, the page events a holding's runs make, and the LIFO free stacks of pages (rooms.py: the rooms'
bookkeeping).

The allocators: each node has a LIFO stack of free pages (page 0 and the pool's last page unused): a
free pushes the request's pages sorted, lowest on top; an allocation pops the top n and
holds them in ascending order. After warm-up the stack is shuffled by reuse, so a holding is many
ranges: one alloc/free event per maximal run of consecutive pages, one read/write/transfer event per
run of the token range (as forensics.simulate does)."""

# ruff: noqa: F405 (the layout's column names)
from __future__ import annotations

import numpy as np
from numba import njit

from forensics.simulate.pages.layout import *  # noqa: F403


@njit(cache=True)
def hpush(H: np.ndarray, n: int, key: int) -> int:
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if H[p] <= key:
            break
        H[i] = H[p]
        i = p
    H[i] = key
    return n + 1


@njit(cache=True)
def hpop(H: np.ndarray, n: int) -> tuple[int, int]:
    top = H[0]
    n -= 1
    last = H[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and H[c + 1] < H[c]:
            c += 1
        if H[c] >= last:
            break
        H[i] = H[c]
        i = c
    H[i] = last
    return top, n


@njit(cache=True)
def emit(
    G: np.ndarray,
    NS: np.ndarray,
    B: np.ndarray,
    B8: np.ndarray,
    ST: np.ndarray,
    slot: int,
    node: int,
    dark: int,
    t: int,
    op: int,
    room: int,
    s: int,
    e: int,
    peer: int,
) -> None:
    NS[node, NB_CNT] += 1
    G[G_ALLEV] += 1
    if node == dark:
        return
    i = NS[node, NB_FILL]
    B[node, 0, i] = t
    B[node, 1, i] = room
    B[node, 2, i] = s
    B[node, 3, i] = e
    B8[node, 0, i] = op
    B8[node, 1, i] = peer
    NS[node, NB_FILL] = i + 1
    G[G_EVENTS] += 1
    ST[slot, EV] += 1


@njit(cache=True)
def emit_pages(
    G: np.ndarray,
    NS: np.ndarray,
    B: np.ndarray,
    B8: np.ndarray,
    ST: np.ndarray,
    slot: int,
    node: int,
    dark: int,
    t: int,
    op: int,
    head: int,
    ps: int,
    rlen: np.ndarray,
    rnext: np.ndarray,
    peer: int,
) -> None:
    """One event per run of the holding that starts at page `head` (global page numbers)."""
    base = NS[node, NB_BASE]
    room = ST[slot, ROOM]
    p0 = head
    while p0 >= 0:
        n = rlen[p0]
        s = (p0 - base) * ps
        emit(G, NS, B, B8, ST, slot, node, dark, t, op, room, s, s + n * ps, peer)
        p0 = rnext[p0]


@njit(cache=True)
def emit_tokens(
    G: np.ndarray,
    NS: np.ndarray,
    B: np.ndarray,
    B8: np.ndarray,
    ST: np.ndarray,
    slot: int,
    node: int,
    pool_node: int,
    dark: int,
    t: int,
    op: int,
    head: int,
    ntok: int,
    ps: int,
    rlen: np.ndarray,
    rnext: np.ndarray,
    peer: int,
) -> None:
    """One event per run of tokens [0, ntok) of the holding at `head` in pool_node's pool."""
    base = NS[pool_node, NB_BASE]
    room = ST[slot, ROOM]
    p0 = head
    done = 0
    while p0 >= 0 and done < ntok:
        cover = min(rlen[p0] * ps, ntok - done)
        s = (p0 - base) * ps
        emit(G, NS, B, B8, ST, slot, node, dark, t, op, room, s, s + cover, peer)
        done += cover
        p0 = rnext[p0]


@njit(cache=True)
def alloc(
    NS: np.ndarray,
    node: int,
    n: int,
    slot: int,
    t: int,
    clear: int,
    stack: np.ndarray,
    pos: np.ndarray,
    holder: np.ndarray,
    rlen: np.ndarray,
    rnext: np.ndarray,
    late_t: np.ndarray,
    RS: np.ndarray,
) -> tuple[int, int, int]:
    """Pop the top n pages of node's free stack and link them, ascending, into runs of consecutive pages
    (a free pushed a holding's pages in descending order, so the pops come in ascending runs: sorting
    those runs is cheaper than sorting the pages). Returns (head page, runs, whether a page had a late
    landing within `clear` before now)."""
    base = NS[node, NB_BASE]
    tp = NS[node, NB_TOP]
    amb = 0
    k = 0
    prev = -2
    for j in range(n):
        g = stack[base + tp - 1 - j]
        pos[g] = -1
        holder[g] = slot
        if late_t[g] > t - clear:
            amb = 1
        if g == prev + 1:
            RS[1, k - 1] += 1
        else:
            RS[0, k] = g
            RS[1, k] = 1
            k += 1
        prev = g
    NS[node, NB_TOP] = tp - n
    sort_runs(RS, k)
    head = RS[0, 0]
    cur = head
    cl = RS[1, 0]
    runs = 1
    for j in range(1, k):
        if RS[0, j] == cur + cl:  # adjacent: one run
            cl += RS[1, j]
        else:
            rlen[cur] = cl
            rnext[cur] = RS[0, j]
            cur = RS[0, j]
            cl = RS[1, j]
            runs += 1
    rlen[cur] = cl
    rnext[cur] = -1
    return head, runs, amb


@njit(cache=True)
def sort_runs(RS: np.ndarray, k: int) -> None:
    """Runs RS[:, :k] in ascending order of their first page."""
    if k > 1:
        order = np.argsort(RS[0, :k])
        st = RS[0, :k][order]
        ln = RS[1, :k][order]
        RS[0, :k] = st
        RS[1, :k] = ln


@njit(cache=True)
def runs_of(head: int, rlen: np.ndarray, rnext: np.ndarray, RS: np.ndarray, k: int) -> int:
    """Append the runs of the holding at `head` to RS[:, k:]; returns the new count."""
    p0 = head
    while p0 >= 0:
        RS[0, k] = p0
        RS[1, k] = rlen[p0]
        k += 1
        p0 = rnext[p0]
    return k


@njit(cache=True)
def push_runs(
    NS: np.ndarray,
    node: int,
    RS: np.ndarray,
    k: int,
    t: int,
    stack: np.ndarray,
    pos: np.ndarray,
    holder: np.ndarray,
    free_t: np.ndarray,
) -> None:
    """Give the pages of runs RS[:, :k] (ascending) back: highest first, so the lowest ends on top."""
    base = NS[node, NB_BASE]
    tp = NS[node, NB_TOP]
    for r in range(k - 1, -1, -1):
        s = RS[0, r]
        for g in range(s + RS[1, r] - 1, s - 1, -1):
            stack[base + tp] = g
            pos[g] = tp
            holder[g] = -1
            free_t[g] = t
            tp += 1
    NS[node, NB_TOP] = tp

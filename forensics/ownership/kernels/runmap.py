"""The screening walk itself (forensics.ownership.steps.screen drives it over each node's events): a run map of one
node's slot space and the compiled loop that walks events over it.

The state is one record per run start (holder and last writer) and a two-level bitset of run starts,
so each event costs a few word operations plus the runs it covers. Adjacent runs with equal state are
merged, which keeps the map small. The walk is bound by memory latency: the map is larger than the
CPU's caches, hence one record per run start rather than an array per field.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.keys import OP_ALLOC, OP_FREE, OP_INJ, OP_READ, OP_SHARE
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.bitset import clear_bit, next_set, prev_set, set_bit
from forensics.ownership.kernels.prefetch import prefetch

# the walk's op codes are forensics.keys' (an index into OPS; -1: an op not in OPS)

# events ahead whose records the walk prefetches
EVENT_TYPES = (np.int64, np.int8, np.int64, np.int64, np.int64)  # an event's k, opc, room, start, end
AHEAD = 8

# columns of RunMap.rec
HOLD_K, HOLD_ROOM, WROTE_K, WROTE_ROOM, SHARED = 0, 1, 2, 3, 4


@njit(cache=True, inline="always")
def _same(rec: np.ndarray, p: int, q: int) -> bool:
    """Runs starting at p and q hold the same state (so they can be one run)."""
    return rec[p, HOLD_K] == rec[q, HOLD_K] and rec[p, WROTE_K] == rec[q, WROTE_K] and rec[p, SHARED] == rec[q, SHARED]


@njit(cache=True, inline="always")
def _emit(prov: np.ndarray, npv: int, ki: int, s: int, e: int, w: int) -> int:
    prov[npv, 0] = ki
    prov[npv, 1] = s
    prov[npv, 2] = e
    prov[npv, 3] = w
    return npv + 1


class RunMap:
    """The walk's state for one node's slot space [0, slots): a two-level bitset of run starts, and at
    each run start the holder's alloc (key k and room), the last write (k and room), and whether two
    rooms have held it at once (1 or 0). It carries over from one chunk of events to the next.

    The five values of a run start are one record (a row of `rec`, 40 bytes): the walk touches run
    starts all over a slot space larger than the CPU's caches, and one record costs about one memory
    access where five arrays cost five (1.7x faster walk at 100M events)."""

    def __init__(self, slots: int):
        self.slots = slots
        nwords = (slots + 1) // 64 + 2
        self.words = np.zeros(nwords, dtype=np.uint64)
        self.summary = np.zeros(nwords // 64 + 2, dtype=np.uint64)
        self.rec = np.zeros((slots + 1, 5), dtype=np.int64)
        self.rec[:, HOLD_K] = -1
        self.rec[:, WROTE_K] = -1
        set_bit(self.words, self.summary, 0)
        set_bit(self.words, self.summary, slots)  # sentinel: the end of the slot space

    def state(self) -> tuple:
        return (self.words, self.summary, self.rec)


@njit(cache=True, inline="always")
def _event(cols: tuple, x: int) -> tuple:
    """Event x of a stream (arrays k, opc, room, start, end): its key, op code, room and slots."""
    return cols[0][x], cols[1][x], cols[2][x], cols[3][x], cols[4][x]


@njit(cache=True, nogil=True)
def screen_chunk(
    state: tuple,
    own: tuple,
    i0: int,
    side: tuple,
    j0: int,
    flagged: np.ndarray,
    prov: np.ndarray,
) -> tuple[int, int, int, int]:
    """Walk events own[i0:] and side[j0:] of a chunk, merged by key (each a tuple of arrays k, opc,
    room, start, end, rising in k; no key in both), over the run map; returns (next own event, next
    side event, rooms written to `flagged`, rows written to `prov`). It stops early, before an event,
    when the buffers may not hold that event's output (at most slots + 1 entries each): drain them
    and call again. The side events (transfers landed in this node) are merged here, as they are
    walked: interleaving them into fresh arrays first cost more than the walk of them.

    flagged: rooms the detailed replay must cover (with repeats). prov (rows of k, s, e, w_k): for
    every flagged read or share, its range split into maximal runs of one last write (w_k, -1 where
    nothing was ever written): the content it found."""
    words, summary, rec = state
    k, _, _, start, end = own
    sk, _, _, sstart, send = side
    slots = rec.shape[0] - 1
    nf = 0
    npv = 0
    n = k.shape[0]
    m = sk.shape[0]
    i = i0
    j = j0
    while i < n or j < m:
        if flagged.shape[0] - nf < slots + 2 or prov.shape[0] - npv < slots + 2:
            break
        if i + AHEAD < n:  # the records the event AHEAD on will touch first (see forensics.ownership.kernels.prefetch)
            prefetch(rec, start[i + AHEAD])
            prefetch(rec, end[i + AHEAD])
        if j < m and (i >= n or sk[j] < k[i]):
            if j + AHEAD < m:
                prefetch(rec, sstart[j + AHEAD])
                prefetch(rec, send[j + AHEAD])
            ki, op, r, a, b = _event(side, j)
            j += 1
        else:
            ki, op, r, a, b = _event(own, i)
            i += 1
        if op < 0 or op == OP_INJ or a < 0 or b > slots:
            flagged[nf] = r  # not something this pass models (inj is the replay's alone): replay the room
            nf += 1
            continue
        if b <= a:
            continue
        for x in (a, b):  # runs must start at a and at b
            if x < slots:
                p = prev_set(words, summary, x)
                if p != x:
                    set_bit(words, summary, x)
                    for c in range(rec.shape[1]):  # the new run start takes the state of its run
                        rec[x, c] = rec[p, c]
        me = False  # this event's room is flagged
        if op == OP_READ or op == OP_SHARE:  # the state does not change
            s = a
            while s < b:
                e = next_set(words, summary, s)
                h = rec[s, HOLD_K]
                clean = h >= 0 and rec[s, HOLD_ROOM] == r and rec[s, WROTE_K] > h and rec[s, WROTE_ROOM] == r
                if rec[s, SHARED] or not clean:
                    me = True
                    if rec[s, SHARED] and h >= 0:
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                s = e
            if me:  # what it found there, as maximal runs of one last write
                s = a
                run_s = a
                run_w = rec[a, WROTE_K]
                while s < b:
                    e = next_set(words, summary, s)
                    if rec[s, WROTE_K] != run_w:
                        npv = _emit(prov, npv, ki, run_s, s, run_w)
                        run_s = s
                        run_w = rec[s, WROTE_K]
                    s = e
                npv = _emit(prov, npv, ki, run_s, b, run_w)
            # undo the splits at a and b where they separate equal runs
            for x in (a, b):
                if 0 < x < slots:
                    p = prev_set(words, summary, x - 1)
                    if _same(rec, p, x):
                        clear_bit(words, summary, x)
        else:
            prev = prev_set(words, summary, a - 1) if a > 0 else -1
            s = a
            while s < b:
                e = next_set(words, summary, s)
                h = rec[s, HOLD_K]
                held = h >= 0 and rec[s, HOLD_ROOM] == r
                other = h >= 0 and not held
                if rec[s, SHARED]:  # the earlier holder may never have freed it: its holding stays open
                    me = True
                    if h >= 0:
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                if op == OP_ALLOC:
                    if other:
                        me = True
                        rec[s, SHARED] = 1
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                    rec[s, HOLD_K] = ki
                    rec[s, HOLD_ROOM] = r
                elif op == OP_FREE:
                    if held:
                        rec[s, HOLD_K] = -1
                    else:
                        me = True
                        if other:
                            flagged[nf] = rec[s, HOLD_ROOM]
                            nf += 1
                else:  # OP_WRITE, OP_XFER
                    if not held:
                        me = True
                        if other:
                            flagged[nf] = rec[s, HOLD_ROOM]
                            nf += 1
                    rec[s, WROTE_K] = ki
                    rec[s, WROTE_ROOM] = r
                if prev >= 0 and _same(rec, prev, s):
                    clear_bit(words, summary, s)
                else:
                    prev = s
                s = e
            if b < slots and prev >= 0 and _same(rec, prev, b):
                clear_bit(words, summary, b)
        if me:
            flagged[nf] = r
            nf += 1
    return i, j, nf, npv


def screen_events(
    k: np.ndarray,
    opc: np.ndarray,
    room: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    runmap: RunMap,
    buffer: int = 1 << 20,
    side: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Walk one chunk of a node's events (timeline order) on `runmap`, which carries over to the next
    chunk, merged with `side` (arrays k, opc, room, start, end of more events in key order, whose keys
    lie between the chunk's; see forensics.ownership.execution.streams.alongside). Returns (flagged rooms, unique;
    provenance rows k, s, e, w_k)."""
    state = runmap.state()
    own = tuple(frozen(c, t) for c, t in zip((k, opc, room, start, end), EVENT_TYPES, strict=True))
    side = tuple(frozen(c, t) for c, t in zip(side or tuple(c[:0] for c in own), EVENT_TYPES, strict=True))
    size = max(buffer, runmap.slots + 2)
    flagged = np.empty(size, dtype=np.int64)
    prov = np.empty((size, 4), dtype=np.int64)
    rooms: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    i = j = 0
    while True:
        i, j, nf, npv = screen_chunk(state, own, i, side, j, flagged, prov)
        rooms.append(np.unique(flagged[:nf]))
        rows.append(prov[:npv].copy())
        if i >= k.shape[0] and j >= side[0].shape[0]:
            break
    return np.unique(np.concatenate(rooms)), np.concatenate(rows)

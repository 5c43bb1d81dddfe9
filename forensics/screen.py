"""Screening pass: which rooms the detailed replay must look at.

Most rooms of an incident are ordinary: they allocate slots nobody else holds, their own prefill or
transfer fills them, they read what they wrote and free what they hold. The detailed, room-local
replay (forensics.replay) and everything after it produce rows only for rooms where something else
happened. This pass walks each node's timeline once, in its event order, over a run map of the slot
space (who holds each run of slots, and whose write is in it), and flags every room that any of
these could concern:

- an alloc of slots another room holds (both rooms: a double allocation); from then on, every event
  on those slots (the replay keeps the first holder's holding open until that room frees it, and a
  lost free keeps it open for good);
- a free, write or transfer into slots the room does not hold (the room, and the holder if any);
- a read or share of slots that are not held by the reader, or whose last write is not the reader's
  own write since its alloc (the reader; whose data it found is the last-writer search's job, over
  every write of the node).

Why this is a superset of what the replay reports (so the screened replay reports exactly what the
full one does; tests/test_screen.py checks it on simulated incidents, with seq gaps and a replay
window): a room that is never flagged saw, at every one of its events, runs that were never held by
two rooms at once and that it held (its alloc is the last alloc of those slots, and nobody freed or
wrote them since without being flagged along with it), and it read only its own writes made after
its alloc. Its own history then gives no hazard, no stale or foreign read and no anomalous write;
and a room whose holding another room's write or alloc hit is flagged at that event.

The walk is a compiled loop (numba) over arrays fetched from DuckDB; its state is two event indices
per run start and a two-level bitset of run starts, so each event costs a few word operations plus
the runs it covers. Adjacent runs with equal state are merged, which keeps the map small.
`investigate --full-replay` skips the screen and replays every room.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

from forensics.db import timed

# op codes of the walk (timeline op names in this order)
OPS = ("alloc", "free", "write", "xfer", "read", "share")
_OPC = "CASE op " + " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(OPS)) + " ELSE -1 END"

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def _msb(x: np.uint64) -> int:
    """Index of the highest set bit of a nonzero word."""
    n = 0
    if x >= np.uint64(1 << 32):
        x >>= np.uint64(32)
        n += 32
    if x >= np.uint64(1 << 16):
        x >>= np.uint64(16)
        n += 16
    if x >= np.uint64(1 << 8):
        x >>= np.uint64(8)
        n += 8
    if x >= np.uint64(1 << 4):
        x >>= np.uint64(4)
        n += 4
    if x >= np.uint64(4):
        x >>= np.uint64(2)
        n += 2
    if x >= np.uint64(2):
        n += 1
    return n


@njit(cache=True, inline="always")
def _lsb(x: np.uint64) -> int:
    return _msb(x & (~x + _ONE))


@njit(cache=True, inline="always")
def _mask_le(b: int) -> np.uint64:
    """Bits 0..b of a word (b in 0..63)."""
    if b >= 63:
        return _ALL
    return (_ONE << np.uint64(b + 1)) - _ONE


@njit(cache=True, inline="always")
def _prev_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The largest run start <= x (slot 0 always starts a run)."""
    w = x >> 6
    m = words[w] & _mask_le(x & 63)
    if m != np.uint64(0):
        return (w << 6) + _msb(m)
    ww = w - 1
    sw = ww >> 6
    sm = summary[sw] & _mask_le(ww & 63)
    while sm == np.uint64(0):
        sw -= 1
        sm = summary[sw]
    w2 = (sw << 6) + _msb(sm)
    return (w2 << 6) + _msb(words[w2])


@njit(cache=True, inline="always")
def _next_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The smallest run start > x (the sentinel at the end of the slot space always is one)."""
    w = x >> 6
    b = x & 63
    m = np.uint64(0) if b >= 63 else words[w] & ~_mask_le(b)
    if m != np.uint64(0):
        return (w << 6) + _lsb(m)
    ww = w + 1
    sw = ww >> 6
    b2 = ww & 63
    sm = summary[sw] & (_ALL if b2 == 0 else ~_mask_le(b2 - 1))
    while sm == np.uint64(0):
        sw += 1
        sm = summary[sw]
    w2 = (sw << 6) + _lsb(sm)
    return (w2 << 6) + _lsb(words[w2])


@njit(cache=True, inline="always")
def _set(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] |= _ONE << np.uint64(x & 63)
    summary[w >> 6] |= _ONE << np.uint64(w & 63)


@njit(cache=True, inline="always")
def _clear(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] &= ~(_ONE << np.uint64(x & 63))
    if words[w] == np.uint64(0):
        summary[w >> 6] &= ~(_ONE << np.uint64(w & 63))


@njit(cache=True)
def screen_events(opc: np.ndarray, room: np.ndarray, start: np.ndarray, end: np.ndarray, slots: int) -> np.ndarray:
    """One node's events in timeline order -> a flag per event: its room must be replayed in detail.
    slots: an upper bound of every `end`."""
    n = opc.shape[0]
    flag = np.zeros(n, dtype=np.bool_)
    nwords = (slots + 1) // 64 + 2
    words = np.zeros(nwords, dtype=np.uint64)
    summary = np.zeros(nwords // 64 + 2, dtype=np.uint64)
    hold = np.full(slots + 1, -1, dtype=np.int64)  # at run starts: event index of the holder's alloc
    wrote = np.full(slots + 1, -1, dtype=np.int64)  # at run starts: event index of the last write
    shared = np.zeros(slots + 1, dtype=np.bool_)  # at run starts: two rooms have held it at once
    _set(words, summary, 0)
    _set(words, summary, slots)  # sentinel: the end of the slot space
    for i in range(n):
        op = opc[i]
        a = start[i]
        b = end[i]
        if op < 0:
            flag[i] = True  # an op this pass does not know: replay the room
            continue
        if b <= a:
            continue
        if a < 0:
            flag[i] = True
            continue
        r = room[i]
        for x in (a, b):  # runs must start at a and at b
            if x < slots:
                p = _prev_set(words, summary, x)
                if p != x:
                    _set(words, summary, x)
                    hold[x] = hold[p]
                    wrote[x] = wrote[p]
                    shared[x] = shared[p]
        prev = _prev_set(words, summary, a - 1) if a > 0 else -1
        s = a
        while s < b:
            e = _next_set(words, summary, s)
            h = hold[s]
            w = wrote[s]
            held = h >= 0 and room[h] == r
            if shared[s]:  # the earlier holder may never have freed it: its holding stays open
                flag[i] = True
                if h >= 0:
                    flag[h] = True
            if op == 0:  # alloc
                if h >= 0 and not held:
                    flag[i] = True
                    flag[h] = True
                    shared[s] = True
                hold[s] = i
            elif op == 1:  # free
                if held:
                    hold[s] = -1
                else:
                    flag[i] = True
                    if h >= 0:
                        flag[h] = True
            elif op <= 3:  # write, xfer
                if not held:
                    flag[i] = True
                    if h >= 0:
                        flag[h] = True
                wrote[s] = i
            else:  # read, share
                if not (held and w > h and room[w] == r):
                    flag[i] = True
            if prev >= 0 and hold[prev] == hold[s] and wrote[prev] == wrote[s] and shared[prev] == shared[s]:
                _clear(words, summary, s)
            else:
                prev = s
            s = e
        if b < slots and prev >= 0 and hold[prev] == hold[b] and wrote[prev] == wrote[b] and shared[prev] == shared[b]:
            _clear(words, summary, b)
    return flag


def screen_rooms(con: duckdb.DuckDBPyConnection) -> None:
    """Create room_scope (node, room): the rooms of each node the detailed replay must cover."""
    with timed("ownership/screen"):
        con.execute("CREATE OR REPLACE TEMP TABLE room_scope (node VARCHAR, room BIGINT)")
        nodes = [r[0] for r in con.execute("SELECT DISTINCT node FROM timeline ORDER BY node").fetchall()]
        for node in nodes:
            ev = con.execute(
                f"""SELECT ({_OPC})::TINYINT AS opc, room, start, "end" FROM timeline WHERE node = ?
                    ORDER BY k""",
                [node],
            ).fetchnumpy()
            room = np.ascontiguousarray(ev["room"], dtype=np.int64)
            start = np.ascontiguousarray(ev["start"], dtype=np.int64)
            end = np.ascontiguousarray(ev["end"], dtype=np.int64)
            slots = int(max(end.max(initial=0), start.max(initial=0))) + 1
            flag = screen_events(np.ascontiguousarray(ev["opc"], dtype=np.int8), room, start, end, slots)
            rooms = np.unique(room[flag])
            if rooms.size:
                con.register("screen_out", pa.table({"room": rooms}))
                try:
                    con.execute("INSERT INTO room_scope SELECT ?, room FROM screen_out", [node])
                finally:
                    con.unregister("screen_out")

"""A two-level bitset of run starts over a node's slot space, as the screening walk's run map keeps it
(forensics.ownership.kernels.runmap): a bit per slot in `words`, a bit per nonzero word in `summary`, so
the run start before or after a slot costs a few word operations whatever the gap between them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ONE = np.uint64(1)
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def msb(x: np.uint64) -> int:
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
def lsb(x: np.uint64) -> int:
    return msb(x & (~x + ONE))


@njit(cache=True, inline="always")
def mask_le(b: int) -> np.uint64:
    """Bits 0..b of a word (b in 0..63)."""
    if b >= 63:
        return ALL
    return (ONE << np.uint64(b + 1)) - ONE


@njit(cache=True, inline="always")
def prev_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The largest run start <= x (slot 0 always starts a run)."""
    w = x >> 6
    m = words[w] & mask_le(x & 63)
    if m != np.uint64(0):
        return (w << 6) + msb(m)
    ww = w - 1
    sw = ww >> 6
    sm = summary[sw] & mask_le(ww & 63)
    while sm == np.uint64(0):
        sw -= 1
        sm = summary[sw]
    w2 = (sw << 6) + msb(sm)
    return (w2 << 6) + msb(words[w2])


@njit(cache=True, inline="always")
def next_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The smallest run start > x (the sentinel at the end of the slot space always is one)."""
    w = x >> 6
    b = x & 63
    m = np.uint64(0) if b >= 63 else words[w] & ~mask_le(b)
    if m != np.uint64(0):
        return (w << 6) + lsb(m)
    ww = w + 1
    sw = ww >> 6
    b2 = ww & 63
    sm = summary[sw] & (ALL if b2 == 0 else ~mask_le(b2 - 1))
    while sm == np.uint64(0):
        sw += 1
        sm = summary[sw]
    w2 = (sw << 6) + lsb(sm)
    return (w2 << 6) + lsb(words[w2])


@njit(cache=True, inline="always")
def set_bit(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] |= ONE << np.uint64(x & 63)
    summary[w >> 6] |= ONE << np.uint64(w & 63)


@njit(cache=True, inline="always")
def clear_bit(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] &= ~(ONE << np.uint64(x & 63))
    if words[w] == np.uint64(0):
        summary[w >> 6] &= ~(ONE << np.uint64(w & 63))

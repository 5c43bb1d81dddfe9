"""Timing peer: the vectorized numpy replay an investigator would write without the tool.

Same input handling as replay_peer.py (its load, clock_offsets and _merged are reused, so transfers
land on the receiver at the same place) and the same rules and output; only the replay differs.
Instead of a Python loop over events, each node's slot space is cut into elementary segments at
every event boundary (np.unique of starts and ends), every event is expanded to the segments it
covers (np.repeat / cumsum), and each (segment, event) entry becomes one integer key,
(segment + 1) << bits | event << 3 | op class, so that a plain sort puts each segment's history in
event order. The state at any event is then a "last entry of such class before it" query, answered
for all entries at once by np.maximum.accumulate of key * mask (the result is valid if it lies in the
entry's own segment, i.e. has the same high bits):

- a read finds the last write/landing before it (its writer, or never-written = a hazard) and the
  last alloc before it: another room's write before that alloc is `stale`, after it `foreign_write`;
- a write/landing finds the last alloc/free/read/share before it: if that is a read or share by
  another room, the slots are a `foreign_write` for that bound reader.

Slot counts are segment lengths. The expansion (sum over events of the segments covered) can be far
larger than the event count (placeholder reads of ~1M slots over fragmented holdings), so each node
is processed in chunks of whole segments holding at most about `max_chunk` expanded entries (a
segment's whole event history stays in one chunk).

    python benchmarks/numpy_peer.py BUNDLE [--out exposures.csv]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np


def _replay_peer():
    mod = sys.modules.get("replay_peer")
    if mod is None:
        spec = importlib.util.spec_from_file_location("replay_peer", Path(__file__).with_name("replay_peer.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["replay_peer"] = mod
        spec.loader.exec_module(mod)
    return mod


rp = _replay_peer()
ALLOC, FREE, WRITE, READ, SHARE, LANDING = rp.ALLOC, rp.FREE, rp.WRITE, rp.READ, rp.SHARE, rp.LANDING
STALE, FOREIGN = rp.STALE, rp.FOREIGN
KINDS = rp.KINDS
MAX_CHUNK = 250_000  # expanded (segment, event) entries per chunk (small: the chunk stays in cache)
_ACTIVE = np.array([ALLOC, FREE, WRITE, READ, SHARE, LANDING])  # the sender's transfer record (-1) is inert


# per-event class codes used inside the replay (ordered so that the masks below are single compares)
C_READ, C_SHARE, C_FREE, C_ALLOC, C_WRITE = 1, 2, 3, 4, 5
_CODE = np.zeros(8, np.int8)
_CODE[[READ, SHARE, FREE, ALLOC, WRITE, LANDING]] = [C_READ, C_SHARE, C_FREE, C_ALLOC, C_WRITE, C_WRITE]
CONSOLIDATE = 4_000_000  # collected exposure rows before they are reduced
PAIRS = 4_000_000  # (event, chunk) pairs built at a time


def _chunks(cov: np.ndarray, max_chunk: int) -> np.ndarray:
    """Segment boundaries [0, ..., S] of chunks of whole segments, each about <= max_chunk entries."""
    excl = np.cumsum(cov) - cov
    cid = excl // max_chunk
    return np.concatenate([[0], np.flatnonzero(np.diff(cid)) + 1, [len(cov)]]).astype(np.int64)


def _last(mask: np.ndarray, key: np.ndarray) -> np.ndarray:
    """For every entry, the key of the last entry at or before it where `mask` holds (0 if none).

    Keys are > 0 and increase along the array, so a running maximum of key * mask is that key; the
    caller checks it lies in the entry's own segment."""
    v = key * mask
    return np.maximum.accumulate(v, out=v)


def _runs(p: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum w over runs of equal consecutive p."""
    new = np.empty(len(p), bool)
    new[0] = True
    np.not_equal(p[1:], p[:-1], out=new[1:])
    at = np.flatnonzero(new)
    return p[at], np.add.reduceat(w, at)


class _Node:
    """Per-node accumulators over chunks (rooms as dense ids: `zero` is the id of room 0 = nobody)."""

    def __init__(self, rooms: np.ndarray, zero: int):
        self.rooms, self.zero, self.n = rooms, zero, len(rooms)
        self.pairs: list[np.ndarray] = []  # packed (recipient, source, kind)
        self.slots: list[np.ndarray] = []
        self.rows = 0
        self.limit = CONSOLIDATE
        self.hz_room: list[np.ndarray] = []
        self.hz_len: list[np.ndarray] = []
        self.z: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, rec, src, kind, slots) -> None:
        if len(slots):
            p = (rec * self.n + src) * 2 + kind
            order = np.argsort(p)  # one chunk's rows: few distinct pairs, many rows
            p, w = _runs(p[order], slots[order].astype(np.int64))
            self.pairs.append(p)
            self.slots.append(w)
            self.rows += len(p)
            if self.rows > self.limit:
                self._reduce()
                self.limit = max(CONSOLIDATE, 2 * self.rows)

    def _reduce(self) -> None:
        u, inv = np.unique(np.concatenate(self.pairs), return_inverse=True)
        sums = np.bincount(inv, weights=np.concatenate(self.slots), minlength=len(u)).astype(np.int64)
        self.pairs, self.slots, self.rows = [u], [sums], len(u)

    def flush(self, node: str, exposures: dict, hazards: dict) -> None:
        if self.pairs:
            self._reduce()
            u, sums = self.pairs[0], self.slots[0]
            kind, rs = u % 2, u // 2
            rec, src = self.rooms[rs // self.n], self.rooms[rs % self.n]
            for a, b, k, c in zip(rec.tolist(), src.tolist(), kind.tolist(), sums.tolist(), strict=True):
                exposures[(node, a, b, k)] += c
        if self.hz_room:
            hz = np.bincount(np.concatenate(self.hz_room), weights=np.concatenate(self.hz_len), minlength=self.n)
            for i in np.flatnonzero(hz).tolist():
                hazards[(node, int(self.rooms[i]))] += int(hz[i])
        if self.z:  # replay_peer's rule for room 0: blank slots count only if the read also finds others' KV
            zev, zlen, zother = (np.concatenate(c) for c in zip(*self.z, strict=True))
            ids, inv = np.unique(zev, return_inverse=True)
            blank = np.bincount(inv, weights=zlen, minlength=len(ids))
            anyother = np.bincount(inv, weights=zother, minlength=len(ids)) > 0
            nb = int(blank[anyother].sum())
            if nb:
                hazards[(node, 0)] += nb


def _replay_chunk(ids, code, room, k0, k1, seglen, g0, g1, acc: _Node) -> int:
    """Events `ids` (in node order) clipped to segments [g0, g1); returns the expansion size."""
    a = np.maximum(k0, g0) - g0
    cnt = np.minimum(k1, g1) - g0 - a
    ne = len(cnt)
    total = int(cnt.sum())
    if total == 0:
        return 0
    ebits = max(ne.bit_length(), 1)
    bits = ebits + 3  # key = (segment + 1) << bits | event << 3 | class
    top = (int(g1 - g0) + 1) << bits
    assert total < 2**31 and top < 2**62
    kdt = np.int32 if top < 2**31 else np.int64
    # expansion: one key per (segment, event); sorted -> segment-major, event order within a segment
    excl = np.cumsum(cnt) - cnt
    key = np.arange(total, dtype=kdt)
    key -= np.repeat(excl.astype(kdt), cnt)  # offset within the event's range of segments
    key <<= bits
    key += np.repeat((((a + 1) << bits) + (np.arange(ne) << 3) + code).astype(kdt), cnt)
    del excl
    key.sort()
    mask = (1 << bits) - 8  # event << 3
    opx = (key & 7).astype(np.int8)
    is_w = opx == C_WRITE
    last_w = _last(is_w, key)  # last write/landing
    last_wa = _last(opx >= C_ALLOC, key)  # last write/landing or alloc
    wi = np.flatnonzero(is_w)
    del is_w
    last_b = _last(opx <= C_ALLOC, key)[wi]  # last alloc/free/read/share, at writes
    r = np.flatnonzero(opx == C_READ)
    del opx

    # reads: the writer of the segment, and whether that write came after the last alloc
    rk = key[r]
    rseg = rk >> bits
    w = last_w[r]
    del last_w
    hw = (w >> bits) == rseg
    writer = np.where(hw, room.take((w & mask) >> 3), acc.zero)
    late = last_wa[r] == w
    del last_wa, w, r
    rroom = room.take((rk & mask) >> 3)
    rlen = seglen[g0 - 1 + rseg]
    blank = writer == acc.zero
    other = ~blank & (writer != rroom)
    acc.add(rroom[other], writer[other], np.where(late[other], FOREIGN, STALE), rlen[other])
    hz = blank & (rroom != acc.zero)
    if hz.any():
        acc.hz_room.append(rroom[hz])
        acc.hz_len.append(rlen[hz])
    z = rroom == acc.zero
    if z.any():
        acc.z.append((ids[(rk[z] & mask) >> 3], np.where(blank[z], rlen[z], 0), ~blank[z]))
    del rk, rseg, writer, late, rroom, rlen, blank, other, hz, z

    # writes and landings: the reader the segment is bound to (last read/share since the last alloc/free)
    wk = key[wi]
    del key
    bound = ((last_b >> bits) == (wk >> bits)) & ((last_b & 7) <= C_SHARE)
    reader = np.where(bound, room.take((last_b & mask) >> 3), acc.zero)
    wroom = room.take((wk & mask) >> 3)
    bad = (reader != acc.zero) & (reader != wroom)
    acc.add(reader[bad], wroom[bad], np.full(int(bad.sum()), FOREIGN), seglen[g0 - 1 + (wk[bad] >> bits)])
    return total


def replay_node(
    ev: dict[str, np.ndarray], exposures: dict, hazards: dict, node: str, max_chunk: int = MAX_CHUNK, stats=None
) -> None:
    op, start, end = ev["op"], ev["start"], ev["end"]
    keep = (end > start) & (start >= 0) & np.isin(op, _ACTIVE)
    code = _CODE[op[keep]]
    rooms, room = np.unique(np.concatenate([[0], ev["room"][keep]]), return_inverse=True)
    zero, room = int(room[0]), room[1:]
    start, end = start[keep], end[keep]
    if len(code) == 0:
        return
    bnds = np.unique(np.concatenate([start, end]))
    seglen = np.diff(bnds)
    nseg = len(seglen)
    k0 = np.searchsorted(bnds, start)
    k1 = np.searchsorted(bnds, end)
    del bnds, start, end
    cov = np.cumsum(np.bincount(k0, minlength=nseg + 1) - np.bincount(k1, minlength=nseg + 1))[:nseg]
    expansion = int(cov.sum())
    edges = _chunks(cov, max_chunk)
    del cov
    nch = len(edges) - 1
    acc = _Node(rooms, zero)
    peak = stats_pairs = 0
    if nch == 1:
        peak = _replay_chunk(np.arange(len(code)), code, room, k0, k1, seglen, 0, nseg, acc)
    else:
        # event -> the chunks it overlaps; built for blocks of chunks holding about PAIRS (event, chunk)
        # pairs each (an event over fragmented slots can span many chunks), grouped by chunk
        c0 = np.searchsorted(edges, k0, side="right") - 1
        c1 = np.searchsorted(edges, k1 - 1, side="right") - 1
        per_chunk = np.cumsum(np.bincount(c0, minlength=nch + 1) - np.bincount(c1 + 1, minlength=nch + 2)[: nch + 1])
        blocks = _chunks(per_chunk[:nch], PAIRS)
        del per_chunk
        for ca, cb in zip(blocks[:-1].tolist(), blocks[1:].tolist(), strict=True):
            m = np.flatnonzero((c0 < cb) & (c1 >= ca))
            b0 = np.maximum(c0[m], ca)
            n = np.minimum(c1[m], cb - 1) - b0 + 1
            evs = np.repeat(m, n)
            ch = np.arange(len(evs), dtype=np.int64) - np.repeat(np.cumsum(n) - n - b0, n)
            order = np.argsort(ch, kind="stable")
            evs = evs[order]
            cut = np.searchsorted(ch[order], np.arange(ca, cb + 1))
            del m, b0, n, ch, order
            for c in range(ca, cb):
                sel = evs[cut[c - ca] : cut[c - ca + 1]]
                t = _replay_chunk(sel, code[sel], room[sel], k0[sel], k1[sel], seglen, edges[c], edges[c + 1], acc)
                peak = max(peak, t)
            stats_pairs = max(stats_pairs, len(evs))
    acc.flush(node, exposures, hazards)
    if stats is not None:
        stats["expansion"] = stats.get("expansion", 0) + expansion
        stats["max_node_expansion"] = max(stats.get("max_node_expansion", 0), expansion)
        stats["peak_chunk"] = max(stats.get("peak_chunk", 0), peak)
        stats["chunks"] = stats.get("chunks", 0) + nch
        stats["peak_pairs"] = max(stats.get("peak_pairs", 0), stats_pairs)
        stats["segments"] = stats.get("segments", 0) + nseg


def replay(bundle: Path, max_chunk: int = MAX_CHUNK, stats: dict | None = None) -> tuple[dict, dict, int]:
    nodes, per_node = rp.load(bundle)
    offsets = rp.clock_offsets(nodes, per_node)
    exposures: dict = defaultdict(int)
    hazards: dict = defaultdict(int)
    events = 0
    for i, n in enumerate(nodes):
        events += len(per_node[n]["op"])
        replay_node(rp._merged(i, nodes, per_node, offsets), exposures, hazards, n, max_chunk, stats)
    return dict(exposures), dict(hazards), events


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--out", type=Path, help="write exposures CSV here")
    ap.add_argument("--max-chunk", type=int, default=MAX_CHUNK, help="expanded entries per chunk")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    stats: dict = {}
    exposures, hazards, events = replay(a.bundle, a.max_chunk, stats)
    if a.out:
        rp.write_csv(exposures, a.out)
    print(json.dumps(stats), file=sys.stderr)  # expansion sizes (not part of the summary line)
    rp.print_summary(exposures, hazards, events, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

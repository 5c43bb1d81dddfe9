"""Per-node state: the page allocator, the prefill radix cache, the slot contents (ground truth)
and the node's own logs (page events with seq numbers, engine log lines)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from forensics.engines.sglang_allocator import Allocator
from forensics.simulate.config import LEGACY, NodeSpec

STALE, FOREIGN = "stale", "foreign_write"


def page_runs(pages: np.ndarray) -> list[tuple[int, int, int]]:
    """Runs of consecutive pages in allocation order: (first page, page count, index in `pages`)."""
    out: list[tuple[int, int, int]] = []
    pl = pages.tolist()
    if not pl:
        return out
    start, prev, i0 = pl[0], pl[0], 0
    for i in range(1, len(pl)):
        p = pl[i]
        if p != prev + 1:
            out.append((start, i - i0, i0))
            start, i0 = p, i
        prev = p
    out.append((start, len(pl) - i0, i0))
    return out


def token_ranges(pages: np.ndarray, ps: int, a: int, b: int) -> list[tuple[int, int]]:
    """Slot ranges [start, end) holding tokens [a, b) of a request whose KV lives in `pages`."""
    out = []
    for p0, n, i in page_runs(pages):
        lo, hi = max(a, i * ps), min(b, (i + n) * ps)
        if lo < hi:
            s = p0 * ps + (lo - i * ps)
            out.append((s, s + hi - lo))
    return out


def page_ranges(pages: np.ndarray, ps: int) -> list[tuple[int, int]]:
    return [(p0 * ps, (p0 + n) * ps) for p0, n, _ in page_runs(pages)]


class PagePool:
    """A node's page allocator, handing out whole pages (page 0 reserved) in the order SGLang does.

    The real rules (fifo, lifo, sorted-deferred: forensics.engines.sglang_allocator.rule, per release,
    page size and PD role) run the port of SGLang's allocators, so a request's pages come out in the
    allocator's order, not sorted. Two rules no SGLang release runs are kept, to reproduce bundles made
    before the port (the committed sample among them):
    - coalesce (decode): LIFO, a freed batch sorted together with the top of the free stack (lowest
      page on top), so neighbouring free pages coalesce into runs; a request's pages ascending;
    - sorted (the prefill nodes beside coalesce): lowest free page first."""

    def __init__(self, n_pages: int, reuse: str = "sorted-deferred", page_size: int = 1) -> None:
        self.reuse, self.ps = reuse, page_size
        self.real = None
        if reuse in LEGACY:
            self.stack = list(range(n_pages, 0, -1))
        else:
            need_sort = {"fifo": False, "lifo": False, "sorted-deferred": True}[reuse]
            if reuse in ("fifo", "lifo") and (reuse == "fifo") != (page_size == 1):
                raise ValueError(f"SGLang runs {reuse} on page size {'1' if reuse == 'fifo' else '> 1'} only")
            # the rule settles the behaviour: every 0.5.x release allocates and frees alike (the port's
            # traces), 0.4.9 is 0.5.x without need_sort
            self.real = Allocator(n_pages * page_size, page_size, need_sort, "0.5.23")

    def __len__(self) -> int:
        if self.real is not None:
            return self.real.available_size() // self.ps
        return len(self.stack)

    def alloc(self, n: int, tokens: int | None = None) -> np.ndarray | None:
        """n pages for a request extended by `tokens` tokens from a page boundary (None: n whole pages);
        the real allocators merge their deferred frees by that count (alloc_extend)."""
        if self.real is not None:
            if n == 0:
                return np.zeros(0, dtype=np.int64)
            ps = self.ps
            if ps == 1:
                got = self.real.alloc(n)
            else:
                k = n * ps if tokens is None else tokens
                assert -(-k // ps) == n
                got = self.real.alloc_extend_pages(k)
            return None if got is None else np.array(got, dtype=np.int64)
        if n > len(self):
            return None
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        take = self.stack[-n:]
        del self.stack[-n:]
        return np.sort(np.array(take, dtype=np.int64))  # a request's pages in ascending order

    def free(self, pages: np.ndarray) -> None:
        """Give pages back, in the order given (a request's KV row: its tokens' order)."""
        if self.real is not None:
            self.real.free_pages_of(pages.tolist())
        elif self.reuse == "coalesce":  # merged with the top of the stack so neighbouring free pages coalesce
            k = min(len(self.stack), max(64, 2 * len(pages)))
            top = self.stack[len(self.stack) - k :]
            del self.stack[len(self.stack) - k :]
            self.stack.extend(np.sort(np.concatenate((pages, np.array(top, np.int64))))[::-1].tolist())
        else:  # lowest page first: less fragmentation
            self.stack = np.sort(np.concatenate((np.array(self.stack, np.int64), pages)))[::-1].tolist()


class Exposures:
    """(recipient idx, source idx, node, kind) -> slot arrays; counted as distinct slots at the end."""

    def __init__(self) -> None:
        self.parts: dict[tuple[int, int, str, str], list[np.ndarray]] = {}

    def add(self, recipient: int, source: int, node: str, kind: str, slots: np.ndarray) -> None:
        self.parts.setdefault((recipient, source, node, kind), []).append(slots)

    def counts(self) -> dict[tuple[int, int, str, str], int]:
        return {k: _distinct(np.concatenate(v)) for k, v in sorted(self.parts.items())}


def _distinct(slots: np.ndarray) -> int:
    """How many distinct values `slots` holds: sorted, one plus the steps (np.unique's hashing took a
    fifth of an incident preset's simulation on arrays of repeated reads)."""
    if not len(slots):
        return 0
    return int(np.count_nonzero(np.diff(np.sort(slots)))) + 1


class SlotState:
    """What each slot of a node's pool holds (request idx, -1 never written) and who attends it."""

    def __init__(self, node: str, n_slots: int, exp: Exposures) -> None:
        self.node, self.exp = node, exp
        self.content = np.full(n_slots, -1, dtype=np.int32)
        self.wtime = np.zeros(n_slots, dtype=np.int64)
        self.attend = np.full(n_slots, -1, dtype=np.int32)

    def write(self, a: int, b: int, rid: int, t: int) -> None:
        att = self.attend[a:b]
        mask = (att >= 0) & (att != rid)
        if mask.any():
            slots = np.flatnonzero(mask) + a
            for u in np.unique(att[mask]).tolist():
                self.exp.add(u, rid, self.node, FOREIGN, slots[att[mask] == u])
        self.content[a:b] = rid
        self.wtime[a:b] = t

    def read(self, a: int, b: int, rid: int, alloc_t: int) -> int:
        """Record the exposures of a read; returns the first slot holding another request's KV (-1: none)."""
        c = self.content[a:b]
        mask = (c >= 0) & (c != rid)
        first = -1
        if mask.any():
            slots = np.flatnonzero(mask) + a
            first = int(slots[0])
            src = c[mask]
            stale = self.wtime[a:b][mask] < alloc_t
            for s in np.unique(src).tolist():
                m = src == s
                if (m & stale).any():
                    self.exp.add(rid, s, self.node, STALE, slots[m & stale])
                if (m & ~stale).any():
                    self.exp.add(rid, s, self.node, FOREIGN, slots[m & ~stale])
        self.attend[a:b] = rid
        return first

    def release(self, a: int, b: int, rid: int) -> None:
        att = self.attend[a:b]
        att[att == rid] = -1


@dataclass
class Block:
    pages: np.ndarray
    owner: int  # request idx whose KV the pages hold
    room: int
    key: int  # system prompt id, or -1 for a unique prefix nobody else matches
    last: int
    lock: int = 0
    parent: int = -1  # radix parent block: a parent is never evicted while it has children
    children: int = 0


class PrefixCache:
    """Radix cache reduced to what the simulation needs: page blocks keyed by system prompt, LRU eviction."""

    def __init__(self) -> None:
        self.blocks: dict[int, Block] = {}
        self.by_key: dict[int, int] = {}
        self.heap: list[tuple[int, int]] = []
        self.next_id = 0

    def insert(self, blk: Block) -> int:
        bid = self.next_id
        self.next_id += 1
        self.blocks[bid] = blk
        if blk.parent >= 0:
            self.blocks[blk.parent].children += 1
        if blk.key >= 0:
            self.by_key[blk.key] = bid
        heapq.heappush(self.heap, (blk.last, bid))
        return bid

    def match(self, key: int) -> tuple[int, Block] | None:
        bid = self.by_key.get(key)
        return None if bid is None else (bid, self.blocks[bid])

    def touch(self, bid: int, t: int) -> None:
        self.blocks[bid].last = t
        heapq.heappush(self.heap, (t, bid))

    def evict_one(self) -> Block | None:
        """Remove the least recently used unlocked leaf block, or None if there is none."""
        skipped = []
        found = None
        while self.heap:
            last, bid = heapq.heappop(self.heap)
            blk = self.blocks.get(bid)
            if blk is None or blk.last != last:
                continue
            if blk.lock > 0 or blk.children > 0:
                skipped.append((last, bid))
                continue
            found = blk
            del self.blocks[bid]
            if blk.parent >= 0 and blk.parent in self.blocks:
                self.blocks[blk.parent].children -= 1
            if blk.key >= 0 and self.by_key.get(blk.key) == bid:
                del self.by_key[blk.key]
            break
        for item in skipped:
            heapq.heappush(self.heap, item)
        return found


class Node:
    """One engine: pool, slot truth, cache (prefill), page-event rows and log lines on its own clock."""

    def __init__(self, spec: NodeSpec, page_size: int, seq_base: int, exp: Exposures, reuse: str) -> None:
        """reuse: the node's page-reuse rule (SimConfig.node_allocator)."""
        self.spec, self.name, self.ps = spec, spec.name, page_size
        n_pages = spec.pool_tokens // page_size
        self.pool = PagePool(n_pages, reuse=reuse, page_size=page_size)
        self.slots = SlotState(spec.name, (n_pages + 1) * page_size, exp)
        self.cache = PrefixCache() if spec.role == "prefill" else None
        self.seq = seq_base
        self.rows: list[tuple[int, int, str, int, int, int, str | None, str | None]] = []
        self.lines: list[tuple[int, str]] = []  # (node-clock µs, message)
        self.jsonl: list[tuple[int, dict[str, object]]] = []
        self.generated = 0  # page events logged (set when the rows are handed to the writer)
        # the vLLM PD driver's own log records (forensics.simulate.vllm_pd): node clock, source, message,
        # level, process
        self.records: list[tuple[int, str, str, str, str]] = []
        self.canary_at: list[int] = []  # true times of the KV canary violations logged (--integrity-lines canary)

    def clock(self, t: int) -> int:
        return t + self.spec.clock_offset_us

    def ev(self, t: int, op: str, room: int, a: int, b: int, peer: str | None = None, src: str | None = None) -> None:
        self.seq += 1
        self.rows.append((self.seq, self.clock(t), op, room, a, b, peer, src))

    def log(self, t: int, msg: str) -> None:
        self.lines.append((self.clock(t), msg))

"""The discrete-event loop: gateway -> decode pre-allocation -> prefill -> transfer -> decode.

Every event is processed in true-time order (ties by insertion order); each node logs on its own clock.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable

import numpy as np

from forensics.engines.sglang import over_length
from forensics.simulate import sglang_lines
from forensics.simulate.batch_lines import BatchLines
from forensics.simulate.cluster import Block, Exposures, Node, page_ranges, token_ranges
from forensics.simulate.config import MS, S, SimConfig
from forensics.simulate.decode import D_END as DECODE_END
from forensics.simulate.decode import DecodeSide
from forensics.simulate.request import Request
from forensics.simulate.state import St

ARRIVE, D_ALLOC, P_READY, P_RETRY, P_DONE, LAND, ABORT, D_READ, D_END = range(9)
assert D_END == DECODE_END


class Engine(DecodeSide):
    def __init__(self, cfg: SimConfig, reqs: list[Request], rng: random.Random) -> None:
        self.cfg, self.reqs, self.rng, self.ps = cfg, reqs, rng, cfg.page_size
        self.exp = Exposures()
        self.nodes = {
            s.name: Node(s, cfg.page_size, rng.randrange(1, 90) * 1000, self.exp, cfg.node_allocator(s.role))
            for s in cfg.nodes
        }
        self.st = [St() for _ in reqs]
        self.heap: list[tuple[int, int, int, int]] = []
        self.n = 0
        self.queues: dict[str, deque[int]] = {s.name: deque() for s in cfg.prefill_nodes}
        self.running: dict[str, bool] = {s.name: False for s in cfg.prefill_nodes}
        self.holder = {
            s.name: np.full(s.pool_tokens // cfg.page_size + 1, -1, dtype=np.int32) for s in cfg.decode_nodes
        }
        self.touch = {s.name: np.zeros(s.pool_tokens // cfg.page_size + 1, dtype=np.int64) for s in cfg.decode_nodes}
        self.late_moves = 0
        # SGLang's periodic batch lines (forensics.simulate.batch_lines), when asked for
        self.batch = (
            BatchLines(self, cfg.batch_lines, cfg.decode_log_interval, cfg.decode_step_ms) if cfg.batch_lines else None
        )

    def push(self, t: int, kind: int, idx: int) -> None:
        self.n += 1
        heapq.heappush(self.heap, (t, self.n, kind, idx))

    def u(self, lo_ms: float, hi_ms: float) -> int:
        return int(self.rng.uniform(lo_ms, hi_ms) * MS)

    def run(self) -> None:
        for r in self.reqs:
            self.push(r.t0, ARRIVE, r.idx)
        handlers: list[Callable[[int, int], None]] = [
            self.arrive,
            self.d_alloc,
            self.p_ready,
            self.p_retry,
            self.p_done,
            self.land,
            self.abort,
            self.d_read,
            self.d_end,
        ]
        if self.batch is not None:  # the batch lines observe the handlers and tick on their own event
            names = dict(
                ARRIVE=ARRIVE, D_ALLOC=D_ALLOC, P_DONE=P_DONE, LAND=LAND, ABORT=ABORT, D_READ=D_READ, D_END=D_END
            )
            handlers = self.batch.wrap(handlers, names)
            self.batch.kind = len(handlers)
            handlers.append(self.batch.tick)
        while self.heap:
            t, _, kind, idx = heapq.heappop(self.heap)
            handlers[kind](t, idx)

    # --- gateway and decode pre-allocation -------------------------------------------------------
    def arrive(self, t: int, i: int) -> None:
        r = self.reqs[i]
        if r.L >= self.cfg.context_len:
            r.status, r.t_end = 400, t + self.u(0.5, 3)
            return
        self.push(t + self.u(0.5, 4), D_ALLOC, i)

    def d_alloc(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        d = self.nodes[r.decode]
        pages = d.pool.alloc(-(-r.L // self.ps), tokens=r.L)  # the pre-allocation: alloc_extend of L tokens
        if pages is None:
            r.status, r.t_end = 503, t + self.u(0.2, 2)
            return
        for a, b in page_ranges(pages, self.ps):
            d.ev(t, "alloc", r.room, a, b)
        s.d_pages, s.d_alloc_t = pages, t
        self.holder[d.name][pages] = i
        self.touch[d.name][pages] = t
        self.push(t + self.u(0.05, 0.5), P_READY, i)

    # --- prefill --------------------------------------------------------------------------------
    def p_ready(self, t: int, i: int) -> None:
        name = self.reqs[i].prefill
        self.queues[name].append(i)
        if not self.running[name]:
            self.start_next(name, t)

    def p_retry(self, t: int, node_no: int) -> None:
        name = self.cfg.prefill_nodes[node_no].name
        self.running[name] = False
        self.start_next(name, t)

    def start_next(self, name: str, t: int) -> None:
        q = self.queues[name]
        if not q:
            return
        i = q[0]
        r, s, p = self.reqs[i], self.st[i], self.nodes[name]
        cache = p.cache
        assert cache is not None
        ps, limit = self.ps, p.spec.max_req_input_len(self.cfg.context_len)
        placeholder = over_length(r.L, limit)
        hit = None if placeholder or r.sp_id < 0 or r.sp_len < ps else cache.match(r.sp_id)
        matched = (r.sp_len // ps) * ps if hit else 0
        n_new = 1 if placeholder else r.L - matched
        need = -(-n_new // ps)
        if hit:
            hit[1].lock += 1
        while len(p.pool) < need:
            blk = cache.evict_one()
            if blk is None:
                break
            for a, b in page_ranges(blk.pages, ps):
                p.ev(t, "free", blk.room, a, b)
                p.slots.release(a, b, blk.owner)
            p.pool.free(blk.pages)
        pages = p.pool.alloc(need, tokens=n_new)
        if pages is None:  # everything left is locked by requests in flight: wait and retry
            if hit:
                hit[1].lock -= 1
            self.running[name] = True
            self.push(t + 20 * MS, P_RETRY, [n.name for n in self.cfg.prefill_nodes].index(name))
            return
        q.popleft()
        self.running[name] = True
        r.placeholder = placeholder
        if placeholder:
            p.log(t, sglang_lines.overlength(r.L, limit, r.rid_p))
        p.log(
            t,
            f"Prefill batch. #new-seq: 1, #new-token: {n_new}, #cached-token: {matched}, "
            f"token usage: {1 - len(p.pool) * ps / p.spec.pool_tokens:.2f}, #running-req: 0, "
            f"#queue-req: {len(q)}"
            if self.batch is None
            else self.batch.prefill(t, p, n_new, matched, len(q), len(pages)),
        )
        if hit:
            bid, blk = hit
            for a, b in page_ranges(blk.pages, ps):
                p.ev(t, "share", r.room, a, b)
            cache.touch(bid, t)
            s.share_bid = bid
        for a, b in page_ranges(pages, ps):
            p.ev(t, "alloc", r.room, a, b)
        rng_new = token_ranges(pages, ps, 0, n_new)
        for a, b in rng_new:
            p.ev(t, "write", r.room, a, b, src="prefill")
            p.slots.write(a, b, i, t)
        for a, b in rng_new:
            p.ev(t, "read", r.room, a, b)
            p.slots.read(a, b, i, t)
        s.p_pages, s.matched, s.p_start = pages, matched, t
        dur = int((300 + n_new * self.cfg.prefill_us_per_token) * self.rng.uniform(0.9, 1.1))
        self.push(t + dur, P_DONE, i)

    def p_done(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        n_x = 1 if r.placeholder else r.L
        land = max(t, s.d_alloc_t + 100) + 200 + int(n_x * 0.05) + self.u(0, 0.3)
        if r.abort:
            land += self.u(300, 900)
            lo = max(t, s.d_alloc_t + MS)
            self.push(lo + int(self.rng.random() * (land - 200 * MS - lo)), ABORT, i)
        s.land_t = land
        self.push(land, LAND, i)
        self.running[r.prefill] = False
        self.start_next(r.prefill, t)

    def land(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        p, d = self.nodes[r.prefill], self.nodes[r.decode]
        assert s.d_pages is not None and s.p_pages is not None
        dest = token_ranges(s.d_pages, self.ps, 0, 1 if r.placeholder else r.L)
        clear = self.cfg.late_clear_ms * MS
        if r.aborted and clear and s.nudges < 6 and self._too_close(t, r.decode, dest, clear):
            s.nudges += 1
            self.late_moves += 1
            self.push(t + clear + self.u(5, 40), LAND, i)
            return
        for a, b in dest:
            p.ev(t, "transfer", r.room, a, b, peer=d.name)
            d.slots.write(a, b, i, t)
            self.touch[d.name][a // self.ps : -(-b // self.ps)] = t
        self._prefill_finish(t, i, p)
        if not r.aborted:
            delay = self.cfg.read_delay_ms  # looser clock bounds when decode reads later
            s.read_t = t + (self.u(delay, 2 * delay) if delay else self.u(0.2, 2))
            self.push(s.read_t, D_READ, i)

    def _too_close(self, t: int, node: str, dest: list[tuple[int, int]], clear: int) -> bool:
        for a, b in dest:
            pg = slice(a // self.ps, -(-b // self.ps))
            if (t - self.touch[node][pg] < clear).any():
                return True
            for h in np.unique(self.holder[node][pg]).tolist():
                if h >= 0:
                    hs = self.st[h]
                    if any(t <= x < t + clear for x in (hs.land_t, hs.read_t, hs.end_t)):
                        return True
        return False

    def _prefill_finish(self, t: int, i: int, p: Node) -> None:
        r, s, ps = self.reqs[i], self.st[i], self.ps
        cache = p.cache
        assert cache is not None and s.p_pages is not None
        n_new = 1 if r.placeholder else r.L - s.matched
        p.log(
            t,
            sglang_lines.time_stats_prefill(
                r.rid_p, r.room, n_new if r.placeholder else r.L, (s.p_start - r.t0) / S, (t - s.p_start) / S, r.t0 / S
            ),
        )
        p.jsonl.append(
            (
                p.clock(t),
                {
                    "rid": r.rid_p,
                    "room": r.room,
                    "prompt_tokens": 1 if r.placeholder else r.L,
                    "completion_tokens": 1,
                    "cached_tokens": s.matched,
                    "finish_reason": {"type": "length", "length": 0 if r.placeholder else 1},
                    "e2e_latency": round((t - s.p_start) / S, 4),
                },
            )
        )
        parent = s.share_bid
        if s.share_bid >= 0:
            cache.blocks[s.share_bid].lock -= 1
        n_full = n_new // ps if not r.placeholder else 0
        keep, tail = s.p_pages[:n_full], s.p_pages[n_full:]
        if len(tail):
            for a, b in page_ranges(tail, ps):
                p.ev(t, "free", r.room, a, b)
                p.slots.release(a, b, i)
            p.pool.free(tail)
        sp_pages = r.sp_len // ps if (r.sp_id >= 0 and s.matched == 0) else 0
        if sp_pages and len(keep) >= sp_pages and cache.match(r.sp_id) is None:
            parent = cache.insert(Block(keep[:sp_pages], i, r.room, r.sp_id, t))
            keep = keep[sp_pages:]
        if len(keep):
            cache.insert(Block(keep, i, r.room, -1, t, parent=parent))

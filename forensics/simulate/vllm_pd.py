"""vLLM's disaggregated path (`forensics simulate --engine vllm --vllm-pd`): prefill and decode nodes each
with vLLM's v1 block pool and KV cache manager (forensics.engines.vllm_allocator, the release the logs
name: 0.33.0 runs 0.29.0's free order, the newest tested), and NixlConnector's pull mode.

The path (vllm/distributed/kv_transfer/kv_connector/v1/nixl/, 0.29.0): the proxy sends the prompt to a
prefill with max_tokens=1; the prefill computes it into its blocks (prefix hits shared), finishes and
holds the blocks (delay_free_blocks) for the decode's read, until the lease runs out (kv_lease_duration,
30 s; "Releasing expired KV blocks ... before lease expired."); the decode gets the request with
kv_transfer_params (remote engine id, remote request id, remote block ids), allocates its own blocks and
READs the remote blocks into them; the prefill frees its blocks when the decode's notification comes.

The leak mechanisms of vLLM #52234 (NIXL receive failures served with HTTP 200), each drawn per request:
- `stale` (a stale reference after block reuse): the prefill has let the request's blocks go before the
  decode reads them (the reference consumed already), another request's prefill reuses them, and the
  decode's READ succeeds: it attends the other request's KV. No failure line anywhere.
- `reused` (a reused reference): the decode's kv_transfer_params name another, consumed request's blocks
  (or block ids past the pool's end); the read fails (`NIXL transfer failure: transfer_failed`), the
  decode serves the request anyway from what its own blocks held.
- `failed` (a failed receive served, vllm-backport #33): the request's own reference, the read fails,
  the failure line is logged, and the response is served from the decode's blocks as they were.

Page events as the SGLang incident writes them (slot = block * block size + offset): alloc, share (a
prefix hit), write and read on prefill; the transfer on the prefill (sender) naming the decode's slots;
alloc, read, write, free on decode. The truth is the driver's own bookkeeping: which request's KV each
slot held when a request attended it (cluster.SlotState on every node), as the SGLang incident's.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable

import numpy as np

from forensics.engines.vllm_allocator import KVCacheManager
from forensics.simulate import vllm_logs, vllm_prefix
from forensics.simulate.cluster import Exposures, Node
from forensics.simulate.config import MS, S, SimConfig
from forensics.simulate.request import Request
from forensics.simulate.state import St

RELEASE = vllm_logs.RELEASE
LEASE_S = 30  # kv_lease_duration's default (vLLM's NIXL KV cache lease)
# per request: the share of decode reads through each leak mechanism (the rest read their own blocks)
RATES = (("stale", 0.04), ("reused", 0.01), ("failed", 0.02))
ARRIVE, P_ADMIT, P_DONE, D_RECV, D_PULL, D_READ, D_END, ABORT, P_EXPIRE = range(9)
# the records' sources, as vLLM 0.29.0's logger names them (file:line of the call)
SRC_FAILED = "base_worker.py:2398"  # nixl/base_worker.py: _log_failure(failure_type="transfer_failed", ...)
SRC_EXPIRED = "base_worker.py:2319"  # nixl/base_worker.py: logger.warning("Releasing expired KV blocks ...")
ENGINE_CORE = "EngineCore_DP0"


class VllmPD:
    """The event loop; its attributes are those simulate.run reads of an Engine (nodes, exp, st, late_moves)."""

    def __init__(self, cfg: SimConfig, reqs: list[Request], rng: random.Random) -> None:
        self.cfg, self.reqs, self.rng, self.bs = cfg, reqs, rng, cfg.page_size
        self.exp = Exposures()
        self.nodes = {
            s.name: Node(s, cfg.page_size, rng.randrange(1, 90) * 1000, self.exp, cfg.node_allocator(s.role))
            for s in cfg.nodes
        }
        # prefix caching on prefill (vLLM's default), on decode with decode_prefix_caching (vLLM's default too:
        # the decode's own hits, then NixlConnector pulls the rest; forensics.simulate.vllm_prefix)
        caching = {"prefill": True, "decode": cfg.decode_prefix_caching}
        self.mgr = {
            s.name: KVCacheManager(s.pool_tokens // self.bs, self.bs, caching[s.role], cfg.context_len, RELEASE)
            for s in cfg.nodes
        }
        self.tok = {name: np.full(len(n.slots.content), -1, np.int64) for name, n in self.nodes.items()}
        self.hits = vllm_prefix.Hits(self.exp)
        self.salt = [vllm_prefix.salt(r.account, cfg.cache_salt_rate) for r in reqs]
        self.d_hit: list[int] = [0] * len(reqs)  # the prompt tokens each request hit on its decode
        self.st = [St() for _ in reqs]
        self.late_moves = 0
        self.heap: list[tuple[int, int, int, int]] = []
        self.n = 0
        self.queues: dict[str, deque[int]] = {s.name: deque() for s in cfg.prefill_nodes}
        self.busy: dict[str, bool] = {s.name: False for s in cfg.prefill_nodes}
        self.mech: list[str] = [""] * len(reqs)
        self.p_blocks: list[list[int]] = [[] for _ in reqs]  # each request's blocks on its prefill
        self.d_blocks: list[list[int]] = [[] for _ in reqs]
        self.held: list[bool] = [False] * len(reqs)  # its prefill blocks are held for the decode's read
        self.p_wt: list[np.ndarray] = [np.zeros(0, np.int64) for _ in reqs]
        self.remote: list[list[int]] = [[] for _ in reqs]  # the block ids its kv_transfer_params name
        self.consumed: dict[str, list[int]] = {s.name: [] for s in cfg.prefill_nodes}  # the last read reference

    def push(self, t: int, kind: int, idx: int) -> None:
        self.n += 1
        heapq.heappush(self.heap, (t, self.n, kind, idx))

    def u(self, lo_ms: float, hi_ms: float) -> int:
        return int(self.rng.uniform(lo_ms, hi_ms) * MS)

    def log(self, node: str, t: int, src: str, msg: str, level: str = "INFO", proc: str = "APIServer") -> None:
        self.nodes[node].records.append((self.nodes[node].clock(t), src, msg, level, proc))

    def run(self) -> None:
        for r in self.reqs:
            self.push(r.t0, ARRIVE, r.idx)
        handlers: list[Callable[[int, int], None]] = [
            self.arrive,
            self.p_admit,
            self.p_done,
            self.d_recv,
            self.d_pull,
            self.d_read,
            self.d_end,
            self.abort,
            self.p_expire,
        ]
        while self.heap:
            t, _, kind, idx = heapq.heappop(self.heap)
            handlers[kind](t, idx)

    # --- helpers ---------------------------------------------------------------------------------
    def _ranges(self, blocks: list[int], a: int, b: int) -> list[tuple[int, int]]:
        """Slot ranges of tokens [a, b) of a request whose KV lives in `blocks`, neighbouring slots merged."""
        out: list[tuple[int, int]] = []
        bs = self.bs
        for k in range(a // bs, -(-b // bs)):
            lo, hi = max(a, k * bs), min(b, (k + 1) * bs)
            x, z = blocks[k] * bs + lo - k * bs, blocks[k] * bs + hi - k * bs
            if out and out[-1][1] == x:
                out[-1] = (out[-1][0], z)
            else:
                out.append((x, z))
        return out

    def _block_ranges(self, blocks: list[int]) -> list[tuple[int, int]]:
        return self._ranges(blocks, 0, len(blocks) * self.bs)

    def _slots(self, blocks: list[int], a: int, b: int) -> np.ndarray:
        """The slots of tokens [a, b), in token order."""
        parts = [np.arange(x, z) for x, z in self._ranges(blocks, a, b)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _tokens(self, r: Request) -> np.ndarray:
        return vllm_prefix.prompt_tokens(r.idx, r.sp_id, r.sp_len, r.L)

    def _prompt(self, r: Request) -> list[int]:
        """Token ids: the system prompt's (shared by every request of it) then the request's own."""
        return self._tokens(r).tolist()  # type: ignore[no-any-return]

    def _hit(self, node: str, i: int, blocks: list[int], computed: int) -> None:
        """The truth of request i's prefix hit on tokens [0, computed) of `blocks`."""
        if computed:
            role = self.nodes[node].spec.role
            want = self._tokens(self.reqs[i])[:computed]
            self.hits.check(
                node, role, i, self.nodes[node].slots, self.tok[node], self._slots(blocks, 0, computed), want
            )

    # --- gateway and prefill ------------------------------------------------------------------------
    def arrive(self, t: int, i: int) -> None:
        r = self.reqs[i]
        p_blocks = self.mgr[r.prefill].pool.num_blocks - 1
        if r.L >= self.cfg.context_len or -(-r.L // self.bs) > p_blocks:  # over max_model_len: the API refuses it
            r.status, r.t_end = 400, t + self.u(0.5, 3)
            return
        api = vllm_logs.api_id(r)
        self.log(r.prefill, t, "request_logger.py:67", vllm_logs.received_prefill(api))
        self.log(r.prefill, t, "async_llm.py:587", vllm_logs.render_added(vllm_logs.engine_rid(r, r.prefill)))
        self.push(t + self.u(0.5, 4), P_ADMIT, i)

    def p_admit(self, t: int, i: int) -> None:
        name = self.reqs[i].prefill
        self.queues[name].append(i)
        self._start(name, t)

    def _start(self, name: str, t: int) -> None:
        q = self.queues[name]
        if not q or self.busy[name]:  # one forward at a time
            return
        i = q[0]
        r, p, mgr = self.reqs[i], self.nodes[name], self.mgr[name]
        rid = vllm_logs.engine_rid(r, name)
        hits, computed, blocks = mgr.arrive(rid, self._prompt(r), self.salt[i])
        if blocks is None:  # too few free blocks: the scheduler waits for a read or an expiry to free some
            self.busy[name] = False
            return
        q.popleft()
        self.busy[name] = True
        for a, b in self._block_ranges(hits):
            p.ev(t, "share", r.room, a, b)
        for a, b in self._block_ranges(blocks[len(hits) :]):
            p.ev(t, "alloc", r.room, a, b)
        new = self._ranges(blocks, computed, r.L)
        for a, b in new:
            p.ev(t, "write", r.room, a, b, src="prefill")
            p.slots.write(a, b, i, t)
        for a, b in new:
            p.ev(t, "read", r.room, a, b)
            p.slots.read(a, b, i, t)
        self._hit(name, i, blocks, computed)
        self.tok[name][self._slots(blocks, computed, r.L)] = self._tokens(r)[computed:]
        self.p_blocks[i], self.held[i] = blocks, True
        # what each of its prompt's slots holds once its forward ends (its own KV, or a hit's same tokens):
        # a slot written since holds another request's KV
        self.p_wt[i] = np.concatenate([p.slots.wtime[a:b] for a, b in self._ranges(blocks, 0, r.L)])
        self.st[i].p_start, self.st[i].matched = t, computed
        dur = int((300 + (r.L - computed) * self.cfg.prefill_us_per_token) * self.rng.uniform(0.9, 1.1))
        self.push(t + dur, P_DONE, i)

    def p_done(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        self.log(r.prefill, t, "request_logger.py:120", vllm_logs.generated(vllm_logs.api_id(r), "length"))
        roll, mech = self.rng.random(), ""
        for name, rate in RATES:
            if roll < rate:
                mech = name
                break
            roll -= rate
        if r.abort:
            mech = ""
        self.mech[i] = mech
        remote = list(self.p_blocks[i])
        if mech == "stale":  # the reference is consumed already: the prefill lets the blocks go
            self._p_free(t, i)
        elif mech == "reused":  # another request's consumed reference, or ids past the pool's end
            last = self.consumed[r.prefill]
            n_pool = self.mgr[r.prefill].pool.num_blocks
            remote = list(last) if last and self.rng.random() < 0.5 else [n_pool + k for k in range(len(remote))]
        self.remote[i] = remote
        self.push(t + self.lease(), P_EXPIRE, i)
        s.land_t = t
        self.push(t + self.u(0.5, 3), D_RECV, i)
        self.busy[r.prefill] = False
        self._start(r.prefill, t)

    def lease(self) -> int:
        return LEASE_S * S

    def _p_free(self, t: int, i: int) -> None:
        r = self.reqs[i]
        if not self.held[i]:
            return
        p = self.nodes[r.prefill]
        for a, b in self._block_ranges(self.p_blocks[i]):
            p.ev(t, "free", r.room, a, b)
            p.slots.release(a, b, i)
        self.mgr[r.prefill].finish(vllm_logs.engine_rid(r, r.prefill))
        self.held[i] = False

    def p_expire(self, t: int, i: int) -> None:
        r = self.reqs[i]
        if self.held[i]:
            rid = vllm_logs.engine_rid(r, r.prefill)
            self.log(r.prefill, t, SRC_EXPIRED, vllm_logs.expired(rid, 0), "WARNING", ENGINE_CORE)
            self._p_free(t, i)
            self._start(r.prefill, t)

    # --- decode -------------------------------------------------------------------------------------
    def d_recv(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        d, mgr = self.nodes[r.decode], self.mgr[r.decode]
        rid = vllm_logs.engine_rid(r, r.decode)
        # the decode's own prefix hits; the blocks it pulls are cached once the READ is done
        # (allocate_slots(delay_cache_blocks=True), then the scheduler's _update_waiting_for_remote_kv)
        hits, computed, blocks = mgr.arrive(rid, self._prompt(r), self.salt[i], delay_cache=True)
        if blocks is None:
            r.status, r.t_end = 503, t + self.u(0.2, 2)
            return
        kv = vllm_logs.transfer_params(r, self.remote[i])
        api = vllm_logs.api_id(r)
        self.log(r.decode, t, "request_logger.py:67", vllm_logs.received_decode(api, r.out, kv))
        self.log(r.decode, t, "async_llm.py:587", vllm_logs.render_added(rid))
        for a, b in self._block_ranges(hits):
            d.ev(t, "share", r.room, a, b)
        for a, b in self._block_ranges(blocks[len(hits) :]):
            d.ev(t, "alloc", r.room, a, b)
        self._hit(r.decode, i, blocks, computed)
        self.d_blocks[i], s.d_alloc_t, self.d_hit[i] = blocks, t, computed
        pull = t + (self.u(300, 3000) if self.mech[i] == "stale" else self.u(1, 20))
        if r.abort:
            self.push(t + int(self.rng.random() * (pull - t)), ABORT, i)
        self.push(pull, D_PULL, i)

    def d_pull(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        if r.aborted:
            return
        p, d = self.nodes[r.prefill], self.nodes[r.decode]
        if self.mech[i] in ("reused", "failed"):  # the READ fails; the decode serves what its blocks held
            kv_local = self.d_blocks[i]
            rid = vllm_logs.engine_rid(r, r.decode)
            remote_rid = vllm_logs.engine_rid(r, r.prefill)
            msg = vllm_logs.transfer_failed(rid, r, remote_rid, kv_local, len(self.remote[i]))
            self.log(r.decode, t, SRC_FAILED, msg, "ERROR", ENGINE_CORE)
        else:  # the READ: each remote block's slots, as the prefill holds them now, into the decode's block
            # (the blocks the decode did not hit: the remote block ids end-trimmed to the local ones,
            # 0.10.2 nixl_connector.py:1181-1185, 0.29.0 nixl/base_worker.py:2638-2645)
            c = self.d_hit[i]
            src = self._slots(self.p_blocks[i], c, r.L)
            moved = p.slots.wtime[src] != self.p_wt[i][c:]  # written since its prefill: another request's KV
            held = np.where(moved, p.slots.content[src], i)
            self.tok[r.decode][self._slots(self.d_blocks[i], c, r.L)] = self.tok[r.prefill][src]
            o = 0
            for a, b in self._ranges(self.d_blocks[i], c, r.L):
                seg = held[o : o + b - a]
                cuts = [0, *(np.flatnonzero(seg[1:] != seg[:-1]) + 1).tolist(), b - a]
                for x, z in zip(cuts, cuts[1:], strict=False):
                    d.slots.write(a + x, a + z, int(seg[x]), t)
                o += b - a
            for a, b in self._ranges(self.d_blocks[i], c, r.L):
                p.ev(t, "transfer", r.room, a, b, peer=d.name)
            # the READ done, as far as the decode knows: its blocks are cached (a stale reference's too)
            self.mgr[r.decode].cache_blocks(vllm_logs.engine_rid(r, r.decode), r.L)
            self.consumed[r.prefill] = list(self.p_blocks[i])
            self._p_free(t, i)  # the decode's notification: the prefill frees the blocks
            self._start(r.prefill, t)
        s.read_t = t + self.u(0.2, 2)
        self.push(s.read_t, D_READ, i)

    def d_read(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        d, mgr = self.nodes[r.decode], self.mgr[r.decode]
        rid = vllm_logs.engine_rid(r, r.decode)
        for a, b in self._ranges(self.d_blocks[i], self.d_hit[i], r.L):
            d.ev(t, "read", r.room, a, b)
            d.slots.read(a, b, i, s.d_alloc_t)
        n_out = 0
        out_tok = vllm_prefix.output_tokens(r.idx, r.L, r.out).tolist()
        for k in range(r.out):
            blocks = mgr.step(rid, out_tok[k])
            if blocks is None:
                break
            n_out += 1
        grown = mgr.requests[rid].blocks[len(self.d_blocks[i]) :]
        for a, b in self._block_ranges(grown):
            d.ev(t + 10, "alloc", r.room, a, b)
        s.out_eff = n_out
        s.end_t = t + 20 + n_out * int(self.rng.uniform(12, 35) * MS)
        self.push(s.end_t, D_END, i)

    def d_end(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        d, mgr = self.nodes[r.decode], self.mgr[r.decode]
        rid = vllm_logs.engine_rid(r, r.decode)
        blocks = mgr.requests[rid].blocks
        for a, b in self._ranges(blocks, r.L, r.L + s.out_eff):
            d.ev(t, "write", r.room, a, b, src="decode")
            d.slots.write(a, b, i, t)
        self.tok[r.decode][self._slots(blocks, r.L, r.L + s.out_eff)] = vllm_prefix.output_tokens(r.idx, r.L, s.out_eff)
        for a, b in self._block_ranges(blocks):
            d.ev(t + 10, "free", r.room, a, b)
            d.slots.release(a, b, i)
        mgr.finish(rid)
        r.status, r.completion, r.t_end = 200, s.out_eff, t + self.u(0.5, 3)
        reason = "length" if s.out_eff >= r.out else "stop"
        self.log(r.decode, t + 10, "request_logger.py:120", vllm_logs.generated(vllm_logs.api_id(r), reason))

    def abort(self, t: int, i: int) -> None:
        r = self.reqs[i]
        d, mgr = self.nodes[r.decode], self.mgr[r.decode]
        rid = vllm_logs.engine_rid(r, r.decode)
        for a, b in self._block_ranges(self.d_blocks[i]):
            d.ev(t, "free", r.room, a, b)
        mgr.finish(rid)
        r.aborted, r.status, r.completion, r.t_end = True, 499, 0, t
        self.log(r.decode, t, "async_llm.py:959", vllm_logs.render_aborted([rid]))

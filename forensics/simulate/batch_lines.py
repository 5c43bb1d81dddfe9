"""SGLang's periodic batch lines, as a simulated node would print them (opt-in: SimConfig.batch_lines).

A decode node prints `Decode batch ...` every `decode_log_interval` decode steps while it has requests
running (scheduler_output_processor_mixin 0.4.9/0.5.4: `forward_ct_decode % decode_log_interval == 0`;
observability/scheduler_metrics_mixin 0.5.11, scheduler_components/metrics_reporter 0.5.23); a prefill
node prints `Prefill batch ...` for each batch it prefills. The values are the simulated node's true
state: `#token` is the pool size minus its available tokens (minus the radix cache's evictable ones),
`pre-allocated usage` the input tokens of the rooms in the transfer queue over the pool size,
`#prealloc-req` / `#transfer-req` / `#queue-req` / `#running-req` the rooms in each decode queue.

The module only observes: it wraps the engine's event handlers (the state they leave) and adds one
event of its own, the decode step tick. It reads a pool through `len(pool)` (free pages) alone and
draws nothing from the simulation's RNG, so a run with batch lines simulates the same traffic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from forensics.simulate.cluster import Node
from forensics.simulate.config import BATCH_RELEASES as RELEASES
from forensics.simulate.config import MS, SimConfig
from forensics.simulate.request import Request
from forensics.simulate.state import St


class Engine(Protocol):
    """What is read of forensics.simulate.engine.Engine."""

    cfg: SimConfig
    reqs: list[Request]
    st: list[St]
    nodes: dict[str, Node]

    def push(self, t: int, kind: int, idx: int) -> None: ...


Handler = Callable[[int, int], None]


def decode_line(release: str, it: int, running: int, used: int, usage: float, prealloc_usage: float,
                prealloc: int, transfer: int, queue: int, gen: float) -> str:  # fmt: skip
    """A PD decode node's `Decode batch` line (no speculative decoding, no retraction), as `release`
    renders it: 0.4.9 scheduler.log_decode_stats; 0.5.4 scheduler_metrics_mixin.log_decode_stats (the
    forward count always, a trailing ', '); 0.5.11 observability/scheduler_metrics_mixin and 0.5.23
    metrics_reporter report_decode_stats (the count only with SGLANG_LOG_FORWARD_ITERS)."""
    head = {"0.4.9": "Decode batch. ", "0.5.4": f"Decode batch [{it}], "}.get(release, "Decode batch, ")
    msg = f"{head}#running-req: {running}, #token: {used}, token usage: {usage:.2f}, "
    msg += f"pre-allocated usage: {prealloc_usage:.2f}, "
    if release != "0.4.9":
        msg += f"#prealloc-req: {prealloc}, #transfer-req: {transfer}, "
    msg += f"#retracted-req: 0, cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: {queue}"
    return msg + (", " if release == "0.5.4" else "")


def prefill_line(release: str, it: int, new_token: int, cached: int, used: int, usage: float, queue: int,
                 bootstrap: int, inflight: int, throughput: float) -> str:  # fmt: skip
    """A PD prefill node's `Prefill batch` line for a batch of one request: 0.4.9
    scheduler.log_prefill_stats (#token from the allocator's log_usage, the PD queues as
    #unbootstrapped-req and #transferring-req, no #running-req); 0.5.4 scheduler_metrics_mixin;
    0.5.11 observability/scheduler_metrics_mixin (#pending-token, the graph flag); 0.5.23
    metrics_reporter (#bootstrap-req, #optimistic-req)."""
    seq = f"#new-seq: 1, #new-token: {new_token}, #cached-token: {cached}, "
    if release == "0.4.9":
        return (
            f"Prefill batch. {seq}#token: {used}, token usage: {usage:.2f}, #unbootstrapped-req: {bootstrap}, "
            f"#queue-req: {queue}, #transferring-req: {inflight}, input throughput (token/s): {throughput:.2f} "
        )
    head = f"Prefill batch [{it}], " if release == "0.5.4" else "Prefill batch, "
    msg = f"{head}{seq}token usage: {usage:.2f}, #running-req: 0, #queue-req: {queue}, "
    if release == "0.5.4":
        return (
            msg
            + f"#prealloc-req: {bootstrap}, #inflight-req: {inflight}, input throughput (token/s): {throughput:.2f}, "
        )
    msg += "#pending-token: 0, "
    if release == "0.5.11":
        msg += f"#prealloc-req: {bootstrap}, #inflight-req: {inflight}, "
    else:
        msg += f"#bootstrap-req: {bootstrap}, #inflight-req: {inflight}, #optimistic-req: 0, "
    return msg + f"cuda graph: False, input throughput (token/s): {throughput:.2f}"


class _Decode:
    """One decode node's queues as SGLang's decode scheduler keeps them."""

    def __init__(self) -> None:
        self.prealloc: set[int] = set()  # DecodePreallocQueue.queue: bootstrapping, not yet allocated
        self.transfer: dict[int, int] = {}  # DecodeTransferQueue: room idx -> tokens pre-allocated
        self.waiting: set[int] = set()  # landed, not yet decoding
        self.running: set[int] = set()
        self.steps = 0  # forward_ct_decode
        self.ticking = False
        self.last_line = 0


class BatchLines:
    """Observes an Engine and writes its nodes' batch lines (Engine.run calls `wrap` and `tick`)."""

    def __init__(self, eng: Engine, release: str, interval: int, step_ms: float) -> None:
        if release not in RELEASES:
            raise ValueError(
                f"unknown SGLang release for batch lines {release!r} (expected one of {', '.join(RELEASES)})"
            )
        if interval < 1 or step_ms <= 0:
            raise ValueError("decode_log_interval must be at least 1 and decode_step_ms positive")
        self.eng, self.release, self.interval = eng, release, interval
        self.step = max(1, int(step_ms * MS))
        self.decode_names = [s.name for s in eng.cfg.decode_nodes]
        self.decode = {n: _Decode() for n in self.decode_names}
        self.inflight: dict[str, set[int]] = {s.name: set() for s in eng.cfg.prefill_nodes}
        self.prefill_ct: dict[str, int] = dict.fromkeys(self.inflight, 0)
        self.prefill_last: dict[str, int] = dict.fromkeys(self.inflight, 0)

    # --- the engine's handlers, observed -----------------------------------------------------------
    def wrap(self, handlers: Sequence[Handler], kinds: dict[str, int]) -> list[Handler]:
        """The handlers, each followed by the queue bookkeeping its event implies; kinds names the
        engine's event kinds (ARRIVE, D_ALLOC, P_DONE, LAND, ABORT, D_READ, D_END)."""
        out = list(handlers)
        eng = self.eng

        def after(kind: str, fn: Callable[[int, int], None]) -> None:
            k = kinds[kind]
            inner = out[k]

            def run(t: int, i: int) -> None:
                before = eng.st[i].nudges if kind == "LAND" else 0
                inner(t, i)
                fn(t, i if kind != "LAND" else (i if eng.st[i].nudges == before else -1))

            out[k] = run

        after("ARRIVE", self._arrived)
        after("D_ALLOC", self._allocated)
        after("P_DONE", lambda t, i: self.inflight[eng.reqs[i].prefill].add(i))
        after("LAND", self._landed)
        after("ABORT", self._aborted)
        after("D_READ", self._started)
        after("D_END", lambda t, i: self.decode[eng.reqs[i].decode].running.discard(i))
        return out

    def _arrived(self, t: int, i: int) -> None:
        r = self.eng.reqs[i]
        if r.status != 400:
            self.decode[r.decode].prealloc.add(i)

    def _allocated(self, t: int, i: int) -> None:
        r = self.eng.reqs[i]
        q = self.decode[r.decode]
        q.prealloc.discard(i)
        if self.eng.st[i].d_pages is not None and r.status != 503:
            q.transfer[i] = r.L

    def _aborted(self, t: int, i: int) -> None:
        self.decode[self.eng.reqs[i].decode].transfer.pop(i, None)

    def _landed(self, t: int, i: int) -> None:
        if i < 0:  # the landing was moved: still in flight
            return
        r = self.eng.reqs[i]
        self.inflight[r.prefill].discard(i)
        q = self.decode[r.decode]
        if q.transfer.pop(i, None) is not None and not r.aborted:
            q.waiting.add(i)

    def _started(self, t: int, i: int) -> None:
        r = self.eng.reqs[i]
        q = self.decode[r.decode]
        q.waiting.discard(i)
        q.running.add(i)
        if not q.ticking:  # decode steps resume: the next line at the next multiple of the interval
            q.ticking = True
            if not q.last_line:
                q.last_line = t
            self.eng.push(
                t + (self.interval - q.steps % self.interval) * self.step, self.kind, self.decode_names.index(r.decode)
            )

    # --- the tick: a decode line every `interval` steps while requests run -------------------------
    kind = -1  # the engine's event kind for ticks (set by Engine)

    def tick(self, t: int, node_no: int) -> None:
        name = self.decode_names[node_no]
        q = self.decode[name]
        q.steps += self.interval - q.steps % self.interval
        if not q.running:
            q.ticking = False
            return
        d = self.eng.nodes[name]
        pool = d.spec.pool_tokens
        used = pool - len(d.pool) * d.ps
        gap = max(t - q.last_line, 1)
        q.last_line = t
        gen = len(q.running) * self.interval * 1e6 / gap
        pre = sum(q.transfer.values())
        d.log(
            t,
            decode_line(self.release, q.steps, len(q.running), used, used / pool, pre / pool, len(q.prealloc),
                        len(q.transfer), len(q.waiting), gen),
        )  # fmt: skip
        self.eng.push(t + self.interval * self.step, self.kind, node_no)

    # --- the prefill line --------------------------------------------------------------------------
    def prefill(self, t: int, p: Node, new_token: int, cached: int, queue: int, pages: int) -> str:
        """The `Prefill batch` line of a batch of one request about to be prefilled on p, its `pages`
        allocated already: 0.4.9 and 0.5.4 print it before the batch allocates (get_new_batch_prefill),
        0.5.11 and 0.5.23 after its forward (process_batch_result_prefill)."""
        cache = p.cache
        evictable = sum(len(b.pages) for b in cache.blocks.values() if b.lock == 0) * p.ps if cache else 0
        pool = p.spec.pool_tokens
        before = self.release in ("0.4.9", "0.5.4")
        used = max(pool - (len(p.pool) + (pages if before else 0)) * p.ps - evictable, 0)
        self.prefill_ct[p.name] += 1
        gap = max(t - self.prefill_last[p.name], 1) if self.prefill_last[p.name] else 0
        self.prefill_last[p.name] = t
        thr = new_token * 1e6 / gap if gap else 0.0
        return prefill_line(self.release, self.prefill_ct[p.name], new_token, cached, used, used / pool, queue, 0,
                            len(self.inflight[p.name]), thr)  # fmt: skip

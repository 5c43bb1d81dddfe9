# mypy: disable-error-code="union-attr,arg-type,assignment"
# (the simulator's engine state is Optional until a request reaches each stage; the driver reads it after)
"""The simulator's request mix driven through SGLang's real allocator and request-to-token pool, with
the plugin's hooks on them (tests/sglang_plugin, benchmarks/plugin_truth.py).

forensics.simulate's Engine decides what happens (arrivals, the placeholder path, aborts, late
landings) and keeps the ground truth; every page it takes or gives back goes through the real SGLang
allocator of its node (hooked), every request's pages are written into a ReqToTokenPool row (hooked;
SGLang's own class where memory_pool imports on CPU, 0.5.23, else forensics.sglang.cpu's stand-in), and
each forward step the simulator models calls the plugin's run_batch hook with the batch's rows. The
transfers call the prefill runtime's on_transfer: the Mooncake manager whose add_transfer_request /
update_status the plugin hooks cannot move KV without its transfer engine (RDMA devices), so the
driver does not go through it; tests/sglang_plugin/test_mooncake.py runs those hooks on the real
manager's methods. The plugin's page files then replace the simulator's in the bundle.

Which allocator runs: page_size=1 drives TokenToKVPoolAllocator (alloc and free are pure torch on
every release); page_size > 1 drives PagedTokenToKVPoolAllocator only on a release with the
torch-native alloc_extend / alloc_decode (0.5.23, use_triton_kernels off on a CPU platform), freeing
through free_segment as 0.5.23 does: 0.5.11's paged allocator runs its Triton kernel, which segfaults
under TRITON_INTERPRET=1, and the driver refuses it (scripts/record_allocator_traces.py drives the
allocators the same way, torch on CPU, never a GPU kernel).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

os.environ.setdefault("TRITON_INTERPRET", "1")


class RealPool:
    """The interface forensics.simulate.cluster.PagePool asks of its `real` allocator, answered by
    SGLang's own allocator class."""

    def __init__(self, sg: Any, size: int, ps: int, need_sort: bool) -> None:
        self.sg, self.ps = sg, ps
        A, torch = sg.A, sg.torch
        old = sg.sglang.__version__.startswith("0.4.")
        if ps == 1:
            self.a = A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None, *(() if old else (need_sort,)))
        else:
            if not hasattr(A.PagedTokenToKVPoolAllocator, "alloc_extend_naive") and "use_triton_kernels" not in (
                A.PagedTokenToKVPoolAllocator.__init__.__code__.co_names
            ):
                raise RuntimeError(
                    f"SGLang {sg.sglang.__version__}'s PagedTokenToKVPoolAllocator runs alloc_extend through its "
                    "Triton kernel only, which crashes under TRITON_INTERPRET=1 on CPU: drive page_size=1 "
                    "(TokenToKVPoolAllocator, pure torch) or a release with the torch-native paged path (0.5.23)"
                )
            self.a = A.PagedTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None, *(() if old else (need_sort,)))
        if hasattr(self.a, "use_triton_kernels"):
            self.a.use_triton_kernels = False  # the torch-native twins: the Triton interpreter is slow
        self.old = old

    def available_size(self) -> int:
        return int(self.a.available_size())

    def alloc(self, n: int) -> list[int] | None:
        out = self.a.alloc(n)
        return None if out is None else out.tolist()

    def alloc_extend(self, pre: list[int], seq: list[int], last: list[int], k: int) -> list[int] | None:
        t = lambda x: self.sg.torch.tensor(x, dtype=self.sg.torch.int64)  # noqa: E731
        if self.old:
            out = self.a.alloc_extend(t(pre), t(seq), t(last), k)
        else:
            out = self.a.alloc_extend(t(pre), t(pre), t(seq), t(seq), t(last), k)
        return None if out is None else out.tolist()

    def alloc_extend_pages(self, tokens: int) -> list[int] | None:
        """The page ids of a fresh request of `tokens` tokens: SGLang's alloc_extend from nothing, each
        page named by its first slot."""
        slots = self.alloc_extend([0], [tokens], [-1], tokens)
        return None if slots is None else [s // self.ps for s in slots[:: self.ps]]

    def free_pages_of(self, pages: list[int]) -> None:
        p = np.asarray(pages, np.int64)
        slots = self.sg.torch.from_numpy((p[:, None] * self.ps + np.arange(self.ps)).ravel() if self.ps > 1 else p)
        if self.ps > 1 and hasattr(self.a, "free_segment"):
            # 0.5.23 releases a request's pages and evicts the radix cache's through free_segment, which
            # frees by page id (free_page_ids) without calling free() (mem_cache/allocator/paged.py)
            self.a.free_segment(slots, start_pos=0)
        else:
            self.a.free(slots)


class _Mode:
    def __init__(self, decode: bool) -> None:
        self.decode = decode

    def is_decode(self) -> bool:
        return self.decode


def run(out: Path, cfg: Any, guard: str = "observe", queue: int = 1 << 20, fmt: str | None = None,
        stall: str | None = None, stall_queue: int = 64,
        stall_window: tuple[float, float] = (0.4, 0.6)) -> dict[str, Any]:  # fmt: skip
    """Simulate `cfg` through the real SGLang classes; OUT/bundle holds the plugin's page files,
    OUT/truth the simulator's truth. Returns the summary, the guard's flags and the recorders' drops.

    stall: a node whose writer thread stalls (it drains its queue, of stall_queue events, only outside
    stall_window, a fraction of the simulated duration): the queue fills, events are dropped, the
    file shows a seq gap (the recorder's `gaps`, returned as "gaps")."""
    from forensics.sglang import guard as guard_hooks
    from forensics.sglang import hooks
    from forensics.sglang.cpu import import_sglang
    from forensics.sglang.hooks import row_of
    from forensics.sglang.recorder import Recorder
    from forensics.sglang.runtime import Runtime
    from forensics.simulate import run as simrun
    from forensics.simulate.cluster import token_ranges
    from forensics.simulate.engine import Engine

    sg = import_sglang()
    real_rows = sg.rows.__module__.startswith("sglang")
    on_kv = real_rows and tuple(int(x) for x in sg.sglang.__version__.split(".")[:3]) >= (0, 5, 23)
    apply_hooks()
    plugin_dir = out / "plugin"
    shutil.rmtree(plugin_dir, ignore_errors=True)
    finished_with_error: set[int] = set()
    state: dict[str, Any] = {"t": 0}
    c0 = cfg.start_us

    class Driven(Engine):
        def __init__(self, c: Any, reqs: Any, rng: Any) -> None:
            super().__init__(c, reqs, rng)
            self.rts: dict[str, Runtime] = {}
            self.rows: dict[str, Any] = {}
            self.fake: dict[tuple[str, int], Any] = {}
            for name, node in self.nodes.items():
                spec = node.spec
                node.pool.real = RealPool(sg, node.pool.real.size if hasattr(node.pool.real, "size") else
                                          spec.pool_tokens, c.page_size, node.pool.real.need_sort)  # fmt: skip
                clock = lambda n=node: n.clock(state["t"])  # noqa: E731
                paused = name == stall
                rec = Recorder(plugin_dir, name, fmt or spec.pages_format, stall_queue if paused else queue,
                               1 << 30, 20, clock=clock, seq_base=node.seq, start=not paused)  # fmt: skip
                self.rts[name] = Runtime(name, c.page_size, rec, guard if spec.role == "decode" else "off",
                                         plugin_dir / "alerts.jsonl", None, clock, spec.role)  # fmt: skip
                self.rows[name] = sg.rows(256 + len(reqs), c.context_len + 4096, "cpu", False)
            for p in self.rts.values():
                p.peers = {n: r for n, r in self.rts.items() if r.role == "decode"}

        def on(self, name: str) -> Runtime:
            rt = self.rts[name]
            if name == stall and rt.rec is not None:  # the stalled writer: drains only outside the window
                f = (state["t"] - c0) / max(1, cfg.duration_us)
                if not stall_window[0] <= f < stall_window[1]:
                    rt.rec.drain()
            hooks.install(rt)
            return rt

        def req(self, name: str, i: int) -> Any:
            r = self.reqs[i]
            f = self.fake.get((name, i))
            if f is None:
                f = SimpleNamespace(rid=r.rid_d, bootstrap_room=r.room, is_chunked=0, kv_committed_len=0,
                                    to_finish=None, prefix_len=0)  # fmt: skip
                if on_kv:  # 0.5.23's Req keeps its row on its ReqKvInfo, and has no req_pool_idx of its own
                    f.kv = _Kv()
                else:
                    f.req_pool_idx = None
                self.fake[(name, i)] = f
            return f

        def _row(self, name: str, i: int, start: int, slots: np.ndarray) -> int:
            pool, f = self.rows[name], self.req(name, i)
            if row_of(f) is None:
                got = pool.alloc([f]) if not sg.sglang.__version__.startswith(("0.4.", "0.5.4")) else None
                if got is None:
                    f.req_pool_idx = pool.alloc(1)[0]
                    self.rts[name].bind_row(int(f.req_pool_idx), f.bootstrap_room, f.rid)
            row = int(row_of(f))
            if slots.size:
                pool.write((row, slice(start, start + slots.size)), sg.torch.from_numpy(slots))
            return row

        def _free_row(self, name: str, i: int) -> None:
            f = self.req(name, i)
            if row_of(f) is not None:
                if sg.sglang.__version__.startswith(("0.4.", "0.5.4")):
                    self.rows[name].free(int(f.req_pool_idx))
                    f.req_pool_idx = None
                else:
                    self.rows[name].free(f)

        def _batch(self, name: str, i: int, decode: bool, seq_len: int, new: int) -> None:
            f = self.req(name, i)
            f.prefix_len = seq_len - new
            rt2t = self.rows[name].req_to_token
            out = rt2t[row_of(f), seq_len - new : seq_len] if new else None
            batch = SimpleNamespace(reqs=[f], forward_mode=_Mode(decode), seq_lens=np.array([seq_len]),
                                    out_cache_loc=out if decode and new == 1 else None)  # fmt: skip
            sched = SimpleNamespace(req_to_token_pool=self.rows[name])
            guard_hooks.h_run_batch(lambda s, b: None, sched, batch)
            if f.to_finish is not None:
                finished_with_error.add(i)
                f.to_finish = None

        # --- the simulator's handlers, each around the real classes ------------------------------
        def d_alloc(self, t: int, i: int) -> None:
            state["t"] = t
            r, s = self.reqs[i], self.st[i]
            self.on(r.decode)
            super().d_alloc(t, i)
            if s.d_pages is not None:  # the pre-allocation's row (DecodePreallocQueue._pre_alloc)
                slots = _slots(token_ranges(s.d_pages, self.ps, 0, r.L))
                self._row(r.decode, i, 0, slots)

        def start_next(self, name: str, t: int) -> None:
            state["t"] = t
            q = self.queues[name]
            i = q[0] if q else None
            self.on(name)
            super().start_next(name, t)
            if i is None or (q and q[0] == i):
                return
            r, s = self.reqs[i], self.st[i]
            n_new = 1 if r.placeholder else r.L - s.matched
            if s.share_bid >= 0 and s.matched:
                blk = self.nodes[name].cache.blocks[s.share_bid]
                self._row(name, i, 0, _slots(token_ranges(blk.pages, self.ps, 0, s.matched)))
            new = _slots(token_ranges(s.p_pages, self.ps, 0, n_new))
            self._row(name, i, s.matched, new)
            self._batch(name, i, False, s.matched + n_new, n_new)

        def p_done(self, t: int, i: int) -> None:
            state["t"] = t
            self.on(self.reqs[i].prefill)
            super().p_done(t, i)

        def land(self, t: int, i: int) -> None:
            state["t"] = t
            r, s = self.reqs[i], self.st[i]
            moved = self.late_moves
            self.on(r.prefill)
            if not (r.aborted and self.cfg.late_clear_ms and s.nudges < 6):
                pass
            super().land(t, i)
            if self.late_moves == moved:  # it landed: the sender logs it, the receiver's ledger takes it
                dest = _slots(token_ranges(s.d_pages, self.ps, 0, 1 if r.placeholder else r.L))
                self.rts[r.prefill].on_transfer(r.room, r.decode, dest)
                self.on(r.prefill)
                self._free_row(r.prefill, i)

        def abort(self, t: int, i: int) -> None:
            state["t"] = t
            r = self.reqs[i]
            self.on(r.decode)
            super().abort(t, i)
            self._free_row(r.decode, i)

        def d_read(self, t: int, i: int) -> None:
            state["t"] = t
            r, s = self.reqs[i], self.st[i]
            self.on(r.decode)
            self._batch(r.decode, i, True, r.L, 0)  # the first decode step attends the prompt
            super().d_read(t, i)
            out = _slots(token_ranges(s.out_pages, self.ps, 0, len(s.out_pages) * self.ps))
            self._row(r.decode, i, r.L, out)

        def d_end(self, t: int, i: int) -> None:
            state["t"] = t
            r, s = self.reqs[i], self.st[i]
            self.on(r.decode)
            if s.out_eff:  # the last step: it attends everything, its output slots written
                self._batch(r.decode, i, True, r.L + s.out_eff, s.out_eff)
            super().d_end(t, i)
            self._free_row(r.decode, i)

    orig = simrun.Engine
    simrun.Engine = Driven  # type: ignore[misc]
    captured: dict[str, Any] = {}
    real_apply = simrun.apply_gap

    def grab(c: Any, eng: Any) -> Any:
        captured["eng"] = eng
        return real_apply(c, eng)

    simrun.apply_gap = grab  # type: ignore[assignment]
    try:
        summary = simrun.simulate(out, cfg)
    finally:
        simrun.Engine = orig  # type: ignore[misc]
        simrun.apply_gap = real_apply  # type: ignore[assignment]
        hooks.install(None)
    eng = captured["eng"]
    drops, gaps = {}, {}
    for name, rt in eng.rts.items():
        if rt.rec is not None:
            rt.rec.close()
            drops[name] = rt.rec.dropped
            gaps[name] = list(rt.rec.gaps)
    pages = out / "bundle" / "pages"
    shutil.rmtree(pages, ignore_errors=True)
    pages.mkdir(parents=True)
    for f in sorted((plugin_dir / "pages").iterdir()):
        shutil.copy(f, pages / f.name)
    alerts = plugin_dir / "alerts.jsonl"
    import json

    flagged_rooms = {json.loads(x)["room"] for x in alerts.read_text().splitlines()} if alerts.exists() else set()
    room_of = {r.idx: r.room for r in eng.reqs}
    return {
        "summary": summary,
        "flagged_rooms": flagged_rooms,
        "errored_rooms": {room_of[i] for i in finished_with_error},
        "drops": drops,
        "gaps": gaps,
        "stats": {n: rt.stats for n, rt in eng.rts.items()},
    }


class _Kv:
    """The fields of 0.5.23's ReqKvInfo (managers/schedule_batch.py) its ReqToTokenPool reads: that
    module does not import on CPU (openai)."""

    def __init__(self) -> None:
        self.req_pool_idx: int | None = None
        self.kv_allocated_len = 0

    @property
    def holds_kv(self) -> bool:
        return self.req_pool_idx is not None


def _slots(ranges: list[tuple[int, int]]) -> np.ndarray:
    if not ranges:
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in ranges])


def apply_hooks() -> None:
    """The plugin's hooks on the installed release, as a server gets them: through load_plugins() where
    the plugin framework is (once per process), else patched in place (apply_direct skips what it has
    already patched)."""
    from forensics.sglang import targets

    targets.apply_direct() if not _framework() else _apply_via_registry()


def _framework() -> bool:
    try:
        import sglang.srt.plugins.hook_registry  # noqa: F401
    except ImportError:
        return False
    return True


def _apply_via_registry() -> None:
    """The plugin path SGLang itself takes: the entry point through load_plugins()."""
    from sglang.srt.plugins import load_plugins

    os.environ.setdefault("KVF_SGLANG_DIR", os.environ.get("KVF_SGLANG_DIR", "/tmp/kvf-sglang-unused"))
    load_plugins()
    from forensics.sglang import hooks

    hooks.configure(None)  # type: ignore[arg-type]  # the driver installs a runtime per simulated node

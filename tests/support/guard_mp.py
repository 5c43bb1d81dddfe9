# mypy: disable-error-code="union-attr,arg-type,assignment,index"
"""The guard across two OS processes: a prefill process and a decode process that share nothing but
the transfer protocol's messages (tests/sglang_plugin/test_guard_protocol.py).

The decode process runs the plugin's decode side on SGLang's real allocator, req-to-token pool
(forensics.sglang.cpu: 0.5.11's is the copied stand-in) and metadata buffers, and 0.5.23's real
CommonKVManager status path; the prefill process runs the plugin's MetadataBuffers.set_buf hook on
the real class. What the transfer engine does by RDMA is played by the decode driver on receipt of a
message: a "kv" message writes the driver's own truth of the slots (the plugin never sees it), an
"aux" message copies prefill's metadata row into decode's buffer, a "status" message is the room's
KVPoll. Stand-ins, because decode.py does not import on these CPU hosts (schedule_batch needs openai):
DecodePreallocQueue._pre_alloc and DecodeTransferQueue._commit_transfer_to_req are small functions
doing what theirs do to the row, the allocator and the metadata row, the receiver's send_metadata a
no-op, each called through the plugin's hook; a decode step is Scheduler.run_batch's hook with a batch
of one request.

The truth: per slot, the room whose KV it holds (-1: never written). A request leaks when a slot it
attends holds another room's KV when it is checked (its commit) or when a decode step runs.
"""

from __future__ import annotations

import multiprocessing as mp
import random
from types import SimpleNamespace
from typing import Any

import numpy as np

SUCCESS, FAILED = 4, 0


def _metadata_buffers(size: int) -> Any:
    import torch
    from sglang.srt.disaggregation.utils import MetadataBuffers

    try:  # 0.5.23: (size, hidden_size, dtype, max_sampling_mask_tokens)
        return MetadataBuffers(size, 16, torch.float32, 16)
    except TypeError:  # 0.5.11: (size, hidden_size, dtype)
        return MetadataBuffers(size, 16, torch.float32)


def prefill_main(conn: Any) -> None:
    """The prefill process: for each room, what decode asked (its destination, the prompt it computes)
    and, when told to run it, the chunks it writes, the metadata row and the room's status."""
    from forensics.sglang import hooks
    from forensics.sglang.cpu import import_sglang
    from tests.support.sglang_drive import apply_hooks

    import_sglang()
    apply_hooks()
    hooks.configure(None)  # type: ignore[arg-type]
    bufs = _metadata_buffers(64)
    rooms: dict[int, dict[str, Any]] = {}
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            conn.send(("bye",))
            return
        if msg[0] == "meta":  # decode's send_metadata: the destination pages and the aux row index
            _, room, dest, idx, computed = msg
            rooms[room] = {"dest": dest, "idx": idx, "computed": computed, "aborted": False}
        elif msg[0] == "abort":  # decode's ABORT: the room turns Failed here; chunks may be in flight
            rooms[msg[1]]["aborted"] = True
        elif msg[0] == "run":  # the transfer worker sends the room's chunks, then concludes it
            _, room, late = msg
            r = rooms.pop(room)
            out: list[tuple[Any, ...]] = []
            if not r["aborted"] or late:  # the pages covering the prompt positions prefill computed
                out.append(("kv", room, r["dest"][: r["computed"]]))
            if not r["aborted"]:
                req = SimpleNamespace(metadata_buffer_index=r["idx"], bootstrap_room=room, output_ids=[7],
                                      origin_input_ids=[0] * r["computed"], cached_tokens=0, cached_tokens_device=0,
                                      cached_tokens_host=0, cached_tokens_storage=0, return_logprob=False,
                                      return_sampling_mask=False, hidden_states_tensor=None,
                                      get_mm_token_counts=lambda: (0, 0, 0))  # fmt: skip
                bufs.set_buf(req)  # hooked: the plugin writes the transferred length into the row
                out.append(("aux", room, bufs.cached_tokens[r["idx"]].clone().numpy()))
            out.append(("status", room, FAILED if r["aborted"] else SUCCESS))
            conn.send(out)


class Decode:
    """The decode process's side: SGLang's classes with the plugin's hooks, and the driver's truth."""

    def __init__(self, sg: Any, ps: int, guard: str, deferred: bool, pool_tokens: int) -> None:
        from forensics.sglang import hooks
        from forensics.sglang.runtime import Runtime

        self.sg, self.ps, self.deferred = sg, ps, deferred
        A, torch = sg.A, sg.torch
        if ps == 1:
            self.alloc = A.TokenToKVPoolAllocator(pool_tokens, torch.float16, "cpu", None, True)
        else:
            self.alloc = A.PagedTokenToKVPoolAllocator(pool_tokens, ps, torch.float16, "cpu", None, True)
            self.alloc.use_triton_kernels = False
        self.rt = Runtime("decode-0", ps, None, guard, None, None, slots=pool_tokens + 2 * ps + 1)
        hooks.install(self.rt)
        self.rows = sg.rows(64, 1 << 14, "cpu", False)
        self.bufs = _metadata_buffers(64)
        self.mgr = _manager()
        sched = SimpleNamespace(req_to_token_pool=self.rows, enable_hisparse=False)
        self.queue = SimpleNamespace(metadata_buffers=self.bufs, scheduler=sched, req_to_token_pool=self.rows)
        self.truth = np.full(pool_tokens + 2 * ps + 1, -1, np.int64)
        self.reqs: dict[int, Any] = {}
        self.free_idx = list(range(64))
        self.leaked: set[int] = set()
        self.refused: set[int] = set()
        self.checked: set[int] = set()

    # --- SGLang's steps, as decode.py takes them ---------------------------------------------------
    def pre_alloc(self, room: int, n: int) -> np.ndarray | None:
        from forensics.sglang import hooks

        req = _req(self.sg, room, n)

        def original(q: Any, r: Any) -> Any:  # DecodePreallocQueue._pre_alloc: row, slots, row write
            self.rows.alloc([r])
            if self.ps == 1:
                loc = self.alloc.alloc(n)
            else:
                t = lambda x: self.sg.torch.tensor(x, dtype=self.sg.torch.int64)  # noqa: E731
                pre, seq, last = t([0]), t([n]), t([-1])
                loc = self.alloc.alloc_extend(pre, pre, seq, seq, last, n)
            if loc is None:
                self.rows.free(r)
                return None
            self.rows.write((hooks.row_of(r), slice(0, n)), loc)
            return loc

        loc = hooks.h_pre_alloc(original, self.queue, req)
        if loc is None:
            return None
        req.metadata_buffer_index = self.free_idx.pop()
        self.reqs[room] = req
        return loc.numpy().astype(np.int64)

    def send_metadata(self, room: int) -> None:
        """The receiver sends prefill the destination pages (CommonKVReceiver.send_metadata, hooked)."""
        from forensics.sglang import protocol

        protocol.h_send_metadata(lambda r, *a: None, SimpleNamespace(bootstrap_room=room), None)

    def release(self, room: int) -> None:
        from forensics.sglang import hooks

        req = self.reqs.pop(room)
        row = hooks.row_of(req)
        slots = self.rows.req_to_token[row, : req.kv_len].clone()
        if self.ps == 1:
            self.alloc.free(slots)
        else:
            self.alloc.free_segment(slots, start_pos=0)
        self.rows.free(req)
        self.bufs.clear_slot(req.metadata_buffer_index) if hasattr(self.bufs, "clear_slot") else None
        self.free_idx.append(req.metadata_buffer_index)

    def commit(self, room: int) -> bool:
        """The receiver polled Success: DecodeTransferQueue._commit_transfer_to_req (hooked)."""
        from forensics.sglang import protocol

        req = self.reqs[room]
        dr = SimpleNamespace(req=req, metadata_buffer_index=req.metadata_buffer_index)
        protocol.h_commit(lambda q, d: None, self.queue, dr)
        self.checked.add(room)
        self._truth_check(req, req.n)
        if req.finished_reason is not None:  # pop_transferred: a FINISH_ABORT after the commit
            self.refused.add(room)
            self.release(room)
            return False
        return True

    def decode_steps(self, room: int, steps: int) -> None:
        """Decode steps through Scheduler.run_batch's hook: each attends the row, writes one new slot."""
        from forensics.sglang import guard as guard_hooks
        from forensics.sglang import hooks

        req = self.reqs[room]
        for _ in range(steps):
            seq = req.kv_len + 1
            if self.ps == 1 or req.kv_len % self.ps == 0:
                out = self.alloc.alloc(1) if self.ps == 1 else self._page()
                if out is None:
                    break
                slot = int(out[0])
            else:
                slot = int(self.rows.req_to_token[hooks.row_of(req), req.kv_len - 1]) + 1
            self.rows.write((hooks.row_of(req), slice(req.kv_len, seq)), self.sg.torch.tensor([slot]))
            req.kv_len = seq
            batch = SimpleNamespace(reqs=[req], forward_mode=_Mode(), seq_lens=np.array([seq]),
                                    out_cache_loc=self.sg.torch.tensor([slot]))  # fmt: skip
            self._truth_check(req, seq - 1)
            guard_hooks.h_run_batch(lambda s, b: None, SimpleNamespace(req_to_token_pool=self.rows), batch)
            if req.to_finish is not None:
                self.refused.add(room)
                break
            self.truth[slot] = room  # the forward pass wrote its new token's KV

    def _page(self) -> Any:
        t = lambda x: self.sg.torch.tensor(x, dtype=self.sg.torch.int64)  # noqa: E731
        return self.alloc.alloc_extend(t([0]), t([0]), t([1]), t([1]), t([-1]), 1)

    def _truth_check(self, req: Any, n: int) -> None:
        from forensics.sglang import hooks

        att = self.rows.req_to_token[hooks.row_of(req), :n].numpy()
        held = self.truth[att]
        if ((held != -1) & (held != req.bootstrap_room)).any():
            self.leaked.add(req.bootstrap_room)

    # --- the protocol's messages -------------------------------------------------------------------
    def on_message(self, msg: tuple[Any, ...], aborted: set[int]) -> str | None:
        kind, room = msg[0], msg[1]
        if kind == "kv":  # the RDMA writes: whole destination pages (the truth only)
            pos = np.asarray(msg[2], np.int64)
            pages = np.unique(pos // self.ps)
            self.truth[(pages[:, None] * self.ps + np.arange(self.ps)).ravel()] = room
        elif kind == "aux" and room in self.reqs:  # the metadata row, by RDMA
            self.bufs.cached_tokens[self.reqs[room].metadata_buffer_index] = self.sg.torch.from_numpy(msg[2])
        elif kind == "status":
            if room in aborted:  # decode cleared the room: CommonKVManager.apply_prefill_status (hooked)
                if self.mgr is not None:
                    self.mgr.apply_prefill_status(bootstrap_room=room, status=msg[2], prefill_rank=0)
                return "concluded"
            return "success" if msg[2] == SUCCESS else "failed"
        return None


class _Mode:
    def is_decode(self) -> bool:
        return True


def _req(sg: Any, room: int, n: int) -> Any:
    from tests.support.sglang_drive import _Kv

    r = SimpleNamespace(rid=f"r{room}", bootstrap_room=room, origin_input_ids=[1] * n, output_ids=[7], n=n,
                        kv_len=n, to_finish=None, finished_reason=None, bootstrap_host="10.0.0.1")  # fmt: skip
    if sg.rows.__module__.startswith("sglang") and sg.sglang.__version__.startswith("0.5.2"):
        r.kv = _Kv()
    else:
        r.req_pool_idx = None
    return r


def _manager() -> Any:
    """0.5.23's CommonKVManager, made without its __init__ (zmq, threads), with the tables its
    apply_prefill_status reads; None where common/conn.py does not import (0.5.11 here)."""
    try:
        from sglang.srt.disaggregation.common.conn import CommonKVManager
    except ImportError:
        return None
    m = object.__new__(CommonKVManager)
    m.request_status, m.required_prefill_response_num_table, m.prefill_response_tracker = {}, {}, {}
    return m


def run(seed: int, ps: int, guard: str, requests: int, deferred: bool, long_rate: float = 0.1,
        abort_rate: float = 0.1, late_rate: float = 0.5, pool_pages: int = 160) -> dict[str, Any]:  # fmt: skip
    """Drive `requests` requests through a prefill process and this (decode) process. deferred: an
    aborted room's pages are freed only when prefill's final status for it arrives (0.5.23's
    deferred release), else at once (its chunk may land late in the pages' next holder)."""
    from forensics.sglang import hooks
    from forensics.sglang.cpu import import_sglang
    from tests.support.sglang_drive import apply_hooks

    sg = import_sglang()
    apply_hooks()
    hooks.configure(None)  # type: ignore[arg-type]
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=prefill_main, args=(there,), daemon=True)
    proc.start()
    rng = random.Random(seed)
    d = Decode(sg, ps, guard, deferred, pool_pages * ps)  # small: pages change hands often
    aborted: set[int] = set()
    waiting: list[int] = []  # rooms published, not yet run by prefill
    held: set[int] = set()  # aborted rooms whose pages wait for prefill's final status (deferred)
    placeholders: set[int] = set()
    made = 0
    try:
        while made < requests or waiting:
            if made < requests and (len(waiting) < 6 or rng.random() < 0.3):
                room = 1_000_003 * (made + 1) + seed
                n = rng.randrange(ps, 12 * ps)
                loc = d.pre_alloc(room, n)
                made += 1
                if loc is None:
                    continue
                computed = 1 if rng.random() < long_rate else n  # a placeholder computes one token
                if computed == 1 and n > 1:
                    placeholders.add(room)
                d.send_metadata(room)
                here.send(("meta", room, loc.tolist(), d.reqs[room].metadata_buffer_index, computed))
                waiting.append(room)
                continue
            room = waiting.pop(rng.randrange(len(waiting)))
            if room not in aborted and rng.random() < abort_rate:  # decode aborts it mid-transfer
                aborted.add(room)
                here.send(("abort", room))
                if deferred:
                    held.add(room)  # its pages wait for prefill's final status
                else:
                    d.release(room)  # freed at once: the pages' next holder may meet its late chunk
                waiting.append(room)  # prefill's worker reaches it later
                continue
            here.send(("run", room, rng.random() < late_rate))
            for msg in here.recv():
                what = d.on_message(msg, aborted)
                if what == "concluded" and room in held:
                    held.discard(room)
                    d.release(room)
                elif what == "success" and d.commit(room):
                    d.decode_steps(room, rng.randrange(1, 3 * ps))
                    if room in d.reqs:
                        d.release(room)
                elif what == "failed":
                    d.release(room)
        here.send(("stop",))
        here.recv()
    finally:
        proc.join(10)
        hooks.install(None)
    return {"leaked": d.leaked, "refused": d.refused, "flagged": set(d.rt.alerted), "checked": d.checked,
            "placeholders": placeholders,
            "aborted": aborted, "stats": d.rt.stats}  # fmt: skip

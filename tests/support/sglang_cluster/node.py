"""One SGLang node in its own OS process (started by the driver with multiprocessing's spawn context).

The plugin is on only as an operator switches it on: the KVF_SGLANG_* variables are set in this
process's environment before SGLang's own load_plugins() runs (python/sglang/srt/plugins/__init__.py),
which calls the plugin's entry point and applies its hooks to SGLang's classes. Nothing here installs
a runtime or links nodes: the plugin makes its runtime on the first allocator call (hooks._ensure).
A process serves several runs in turn: between them, reset sets the next run's variables, has the
plugin read them again (hooks.configure) and drops the closed runtime (hooks.install(None)).

What is SGLang's own code, run as a server runs it (python/sglang/srt/..., 0.5.23 and 0.5.11 alike
unless said):
- the KV allocator: TokenToKVPoolAllocator (page size 1; 0.5.23 mem_cache/allocator/token.py, 0.5.11
  mem_cache/allocator.py) and, on 0.5.23 only, mem_cache/allocator/paged.py PagedTokenToKVPoolAllocator
  (page size 16, its torch-native alloc_extend / alloc_decode: use_triton_kernels off, as on a CPU
  platform); 0.5.11's paged allocator has only its Triton kernel, which crashes under TRITON_INTERPRET,
  so page size 16 is refused there with that reason (paged_refusal);
- the rows: mem_cache/memory_pool.py ReqToTokenPool (prefill), disaggregation/decode.py
  DecodeReqToTokenPool (decode);
- the decode pre-allocation: disaggregation/decode.py DecodePreallocQueue._pre_alloc (with its
  alloc_for_decode_prealloc on 0.5.23), on a queue made without its __init__ (which starts the transfer
  manager and its threads) and given the attributes _pre_alloc reads;
- the forward pass entry: managers/scheduler.py Scheduler.run_batch, on a Scheduler made without its
  __init__ and given what run_batch reads on the plain (non-overlap, non-speculative) path;
- the transfer: disaggregation/mooncake/conn.py MooncakeKVManager.add_transfer_request on the prefill,
  CommonKVManager.update_status (disaggregation/common/conn.py) on both sides; the room's end through
  conclude_transfer (0.5.23) or, on 0.5.11, the update_status(room, Success) its transfer_worker makes
  after the last chunk; the decode side's MooncakeKVReceiver (made without its __init__, which
  bootstraps over HTTP) with its own poll() (0.5.23: CommonKVReceiver.poll) deciding admission and its
  own abort() on a client abort (0.5.23: the room turns Failed in the manager; 0.5.11: only the
  receiver's conclude_state); the prefill's MooncakeKVManager._handle_abort_notification on the ABORT
  message (0.5.23; 0.5.11 has no such message, the prefill never learns of the abort);
- the transfer protocol's points the guard hooks: the receiver's send_metadata after _pre_alloc
  (0.5.23 CommonKVReceiver.send_metadata, 0.5.11 MooncakeKVReceiver.send_metadata: the destination
  pages and the metadata row index from ReqToMetadataIdxAllocator); the prefill's
  MetadataBuffers.set_buf (disaggregation/utils.py, CPU buffers) for the first output token; decode's
  DecodeTransferQueue._commit_transfer_to_req (made without its __init__) on Success, which reads the
  metadata row; the prefill's status on decode through CommonKVManager.apply_prefill_status (0.5.23)
  or 0.5.11's own decode thread (start_decode_thread's closure, which drops it for a room decode
  cleared; the plugin taps its socket), also for a room decode aborted;
- the deferred release on 0.5.23 (decode.py DecodeTransferQueue._defer_release,
  resolve_deferred_releases, _do_release; the receiver's ensure_abort_notified, the prefill's
  _handle_deferred_abort_notification and _maybe_ack_drained_abort, decode's handle_abort_ack_message
  and is_abort_release_safe), SGLang's default (SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE).

What is a stub (it needs a GPU, RDMA devices or a network):
- the model forward (model_worker.forward_batch_generation): it reads the KV buffer (a CPU tensor,
  one int per slot: the room whose KV the slot holds, 0 for none) at every slot the request's
  req_to_token row names below seq_len, and writes the request's room into its out_cache_loc slots.
  What it reads is the driver's truth of what each forward pass attended;
- the Mooncake transfer worker's RDMA write: the prefill returns the chunk's destination slots to the
  driver, which delivers them to the decode process as a message that writes those slots of its KV
  buffer, possibly late (after an abort freed them and another request took them);
- the zmq messages (status, ABORT, ABORT_ACK, the receiver's metadata message): relayed by the driver
  (send_kv_status_message, _send_multipart_locked and the receiver's bootstrap socket captured), and
  0.5.23's decode thread's handling of a status message (apply_prefill_status, above);
- the metadata row's RDMA write: the prefill returns its filled row (every MetadataBuffers tensor's
  row) and the driver writes it into the decode's MetadataBuffers row with the room's last chunk,
  at the index decode sent, whoever holds that row by then;
- of the deferred release (above): pop_transferred's Failed path (the driver calls _defer_release as
  it does for a held room), its clock (time.monotonic in decode.py is the driver's tick, so the
  timeout is in ticks), its all-reduce (a gloo group of this one rank), the
  transfer worker's chunk accounting (_staging_outstanding counted when the driver takes the chunks,
  drained when they land), the decode thread's dispatch of the ABORT_ACK (the driver hands it to
  handle_abort_ack_message) and release_kv_cache in _release_request (the driver's _release);
- 0.5.11's decode thread (MooncakeKVManager.start_decode_thread) is SGLang's own, reading prefill's
  status messages from an inbox the driver fills instead of its zmq socket, its heartbeat checker idle;
  0.5.23's decode thread is not started: the driver calls apply_prefill_status and
  handle_abort_ack_message as it would;
- the decode radix cache (off: --disaggregation-decode-enable-radix-cache is off by default) and
  release_kv_cache: a request's slots go back through the allocator's own free() and its row through
  the pool's own free(), which is what ChunkCache.cache_finished_req does (mem_cache/chunk_cache.py);
- imports: stubs.py stands in for sgl_kernel (CUDA kernels) and for the pure-Python packages a venv
  lacks (scripts/sglang_test_venv.sh installs all but openai, and compressed_tensors on 0.5.11).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

import numpy as np

ENDPOINT_PORT = 7000  # decode node k's transfer endpoint: 10.0.0.<k+1>:<7000+k>


class _Open(SimpleNamespace):
    """Attributes run_batch reads that this driver leaves at their off value (None)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _Nothing:
    """A collaborator whose every method does nothing (metrics, profiler, scripted hooks)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


def _nothing(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Nothing()


class _Inbox:
    """Decode's zmq PULL socket as the decode thread reads it (recv_multipart): the driver delivers a
    message and waits until the thread has handled it (it is back at recv_multipart)."""

    def __init__(self) -> None:
        self.q: queue.Queue[list[bytes]] = queue.Queue()
        self.busy = False

    def recv_multipart(self) -> list[bytes]:
        if self.busy:
            self.q.task_done()
        msg = self.q.get()
        self.busy = True
        return msg

    def deliver(self, msg: list[bytes]) -> None:
        self.q.put(msg)
        self.q.join()


class Node:
    def __init__(self, spec: dict[str, Any]) -> None:
        from tests.support.sglang_cluster import stubs

        self.stood_in = stubs.install()
        os.environ["TRITON_INTERPRET"] = "1"
        from forensics.sglang.cpu import import_sglang

        sg = import_sglang()
        from sglang.srt.plugins import load_plugins

        load_plugins()  # the plugin's register() under the KVF_SGLANG_* of this process
        from sglang.srt.disaggregation import decode as D
        from sglang.srt.disaggregation import utils as U
        from sglang.srt.disaggregation.mooncake import conn
        from sglang.srt.disaggregation.utils import DisaggregationMode
        from sglang.srt.managers import schedule_batch
        from sglang.srt.managers.scheduler import Scheduler
        from sglang.srt.mem_cache import memory_pool
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        # 0.5.23 keeps a request's KV bookkeeping in Req.kv (schedule_batch.ReqKvInfo); 0.5.11 on the
        # Req itself (req_pool_idx, kv_allocated_len): there the stand-in's kv is the request
        self.sg, self.torch, self.D, self.conn, self.U = sg, sg.torch, D, conn, U
        self.ReqKvInfo = getattr(schedule_batch, "ReqKvInfo", None)
        self.version = sg.sglang.__version__  # not `release`: the command of that name
        self.classes = (Scheduler, DisaggregationMode, memory_pool)
        self.ForwardMode, self.KVPoll = ForwardMode, conn.KVPoll
        self.setup(spec)

    def setup(self, spec: dict[str, Any]) -> None:
        """A run's state: the allocator, rows, queue, scheduler and manager, new (the imports and the
        plugin's hooks stay as load_plugins() applied them)."""
        Scheduler, DisaggregationMode, memory_pool = self.classes
        sg, D = self.sg, self.D
        if (
            spec["page_size"] > 1
            and not hasattr(sg.A.PagedTokenToKVPoolAllocator, "alloc_extend_naive")
            and ("use_triton_kernels" not in sg.A.PagedTokenToKVPoolAllocator.__init__.__code__.co_names)
        ):
            raise RuntimeError(paged_refusal(self.version))
        self.name, self.role, self.ps = spec["name"], spec["role"], spec["page_size"]
        self.deferred, self.timeout_ticks = spec.get("release") == "deferred", spec.get("timeout_ticks", 3)
        self.tick = 0
        size, rows, ctx = spec["pool"], spec["rows"], spec["context"]
        torch = sg.torch
        if self.ps == 1:
            self.alloc = sg.A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None, False)
        else:
            self.alloc = sg.A.PagedTokenToKVPoolAllocator(size, self.ps, torch.float16, "cpu", None, False)
            self.alloc.use_triton_kernels = False
        self.kv = torch.zeros(size + 2 * self.ps + 1, dtype=torch.int64)  # the KV buffer: room per slot
        if self.role == "decode":
            _publish_disagg()
            self.pool = D.DecodeReqToTokenPool(rows, ctx, "cpu", False, rows)
            q = object.__new__(D.DecodePreallocQueue)
            q.req_to_token_pool, q.token_to_kv_pool_allocator = self.pool, self.alloc
            q.token_to_kv_pool = None  # not an SWA pool: _uses_swa_tail_prealloc is False
            q.scheduler = SimpleNamespace(
                enable_hisparse=False, sliding_window_size=None, server_args=_server_args()
            )  # 0.5.11 reads the args from here
            q.tree_cache = _Nothing()  # maybe_hand_to_session: the decode radix cache is off
            self.queue = q
        else:
            self.pool = memory_pool.ReqToTokenPool(rows, ctx, "cpu", False)
        # the metadata rows of the first output token (disaggregation/utils.py MetadataBuffers, on CPU
        # as a server without a custom memory pool keeps them) and their index allocator
        self.meta = self._metadata_buffers(rows)
        self.meta_idx = self.U.ReqToMetadataIdxAllocator(rows)
        self.tq = self._transfer_queue(q.scheduler) if self.role == "decode" else None
        mode = DisaggregationMode.DECODE if self.role == "decode" else DisaggregationMode.PREFILL
        self.sched = self._scheduler(Scheduler, mode)
        self.mgr = self._manager(mode)
        self.sent: list[dict[str, Any]] = []
        self.reqs: dict[int, Any] = {}  # room -> the node's Req stand-in
        self.running: list[int] = []  # decode: rooms in the running batch, in admission order
        self.out_left: dict[int, int] = {}
        self.truth: dict[int, dict[str, Any]] = {}  # room -> what its forward passes read
        self.prefill_slots: dict[int, Any] = {}
        self.receivers: dict[int, Any] = {}  # decode: room -> its MooncakeKVReceiver

    # --- SGLang objects made without their __init__ ------------------------------------------------
    def _scheduler(self, Scheduler: Any, mode: Any) -> Any:
        # a subclass only for the fallback: attributes run_batch's plain path touches and this driver
        # leaves off (stage metrics, profiler, tracing) answer with a collaborator that does nothing
        Sched = type("Scheduler", (Scheduler,), {"__getattr__": lambda self, n: _nothing(n)})
        s = object.__new__(Sched)
        s.req_to_token_pool, s.token_to_kv_pool_allocator = self.pool, self.alloc
        s.disaggregation_mode, s.is_generation, s.enable_overlap, s.enable_pdmux = mode, True, False, False
        s.forward_ct, s._sched_idled, s.processed_tokens_counter = 0, False, 0
        s.scripted_scheduler_hook, s.forward_sleep_time = None, None
        s.enable_unified_cache_external_linker, s.attn_dp_enabled = False, False
        s.metrics_reporter, s.profiler_manager = _Nothing(), _Nothing()
        # 0.5.11's run_batch reads the server args and the profiler's counters (scheduler_profiler_mixin.py
        # _profile_batch_predicate): no profile requested
        s.server_args, s.profile_by_stage = _server_args(), False
        s.profiler_target_forward_ct, s.profiler_start_forward_ct = None, None
        s.spec_algorithm = SimpleNamespace(is_none=lambda: True)
        s.future_map = None
        s.model_worker = SimpleNamespace(forward_batch_generation=self._forward)
        s.update_cache_from_scheduler = lambda batch, result: None
        s._copy_auxiliary_output_to_cpu = lambda batch, result: None
        s.maybe_send_cached_prefix_chunk = lambda req, allow_send=True: None
        return s

    def _manager(self, mode: Any) -> Any:
        m = object.__new__(self.conn.MooncakeKVManager)
        m.disaggregation_mode = mode
        m.request_status, m.transfer_infos, m.transfer_queues = {}, {}, [queue.Queue()]
        # SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE (on by default in 0.5.23): the run's choice
        m.deferred_bootstrap, m.enable_deferred_decode_kv_release = None, self.deferred
        m._deferred_abort_ack_tracker, m._deferred_abort_generation = {}, 0
        # one rank per node (the ABORT_ACK names the sender: _prefill_unique_rank)
        m.attn_tp_rank, m.pp_size, m.attn_cp_size, m.pp_rank, m.attn_cp_rank = 0, 1, 1, 0, 0
        m._deferred_ack_targets, m._deferred_ack_poisoned_rooms, m._staging_outstanding = {}, set(), {}
        m.failure_lock, m.failure_records = threading.Lock(), {}
        m.enable_staging, m._staging_handler, m.defer_decode_allocation = False, None, False
        m.required_prefill_response_num_table, m.prefill_response_tracker = {}, {}
        m.addr_to_rooms_tracker = __import__("collections").defaultdict(set)
        m.local_ip, m.rank_port = f"10.0.0.{9 if self.role == 'prefill' else 8}", 17000
        m.get_session_id = lambda: f"{self.name}:0"
        m.waiting_timeout = 3600.0  # SGLANG_DISAGGREGATION_WAITING_TIMEOUT: the driver's ticks decide
        m.send_kv_status_message = lambda **kw: self.sent.append(kw)  # the zmq status message: relayed
        m._send_multipart_locked = lambda *a, **kw: self.sent.append({"multipart": a})  # the ABORT_ACK
        self.inbox = None
        if self.role == "decode" and not hasattr(m, "apply_prefill_status"):
            self._start_decode_thread(m)
        return m

    def _start_decode_thread(self, m: Any) -> None:
        """0.5.11: SGLang's own decode thread (mooncake/conn.py MooncakeKVManager.start_decode_thread,
        through the plugin's hook on it), reading prefill's status messages from an inbox the driver
        fills (status) in place of the zmq PULL socket; its threads made daemons (SGLang starts them
        as non-daemon threads, which would keep a node process from exiting) and its heartbeat checker
        idle (its HTTP health checks: prefill_info_table is empty and it sleeps an hour)."""
        m.server_socket = self.inbox = _Inbox()
        m.heartbeat_interval, m.prefill_info_table, m.connection_lock = 3600.0, {}, threading.Lock()
        real = self.conn.threading
        self.conn.threading = SimpleNamespace(
            **{k: getattr(real, k) for k in ("Lock", "RLock", "Event", "Condition", "current_thread")},
            Thread=lambda *a, **k: real.Thread(*a, **{**k, "daemon": True}),
        )
        try:
            type(m).start_decode_thread(m)  # the class's attribute: the plugin's hook around it
        finally:
            self.conn.threading = real

    def _metadata_buffers(self, rows: int) -> Any:
        import inspect

        MB = self.U.MetadataBuffers
        kw = {"max_sampling_mask_tokens": 16} if "max_sampling_mask_tokens" in inspect.signature(MB).parameters else {}
        return MB(rows, 16, self.torch.float32, **kw)

    def _transfer_queue(self, sched: Any) -> Any:
        """The decode's DecodeTransferQueue (disaggregation/decode.py), made without its __init__ (which
        takes the gloo group and the transfer manager), with what _commit_transfer_to_req reads: the
        metadata buffers, the scheduler's checksum computer (off) and reasoning-token counter (a
        collaborator that does nothing), the speculative algorithm (none), the tree cache (no HiCache)."""
        tq = object.__new__(self.D.DecodeTransferQueue)
        tq.metadata_buffers = self.meta
        tq.scheduler = SimpleNamespace(kv_checksum_computer=None, batch_result_processor=_Nothing(),
                                       req_to_token_pool=self.pool, server_args=sched.server_args,
                                       enable_decode_hicache=False)  # fmt: skip
        tq.spec_algorithm = SimpleNamespace(is_none=lambda: True)
        tq.tree_cache = _Nothing()
        # the deferred release (0.5.23 _defer_release / resolve_deferred_releases / _do_release), SGLang's
        # own: its timeout in the driver's ticks (the clock decode.py reads, time.monotonic, is the tick:
        # _TickClock), its all-reduce over a gloo group of this one rank, no staging, no host receive,
        # no metrics; the KV released by the driver's release_kv_cache stand-in (_release), the metadata
        # row by _do_release itself
        tq.enable_deferred_kv_release, tq.deferred_kv_release_timeout = self.deferred, float(self.timeout_ticks)
        tq._deferred_releases, tq.enable_staging, tq.enable_host_receive = [], False, False
        tq.gloo_group, tq.req_to_metadata_buffer_idx_allocator = None, self.meta_idx
        tq.scheduler.metrics_reporter = SimpleNamespace(enable_metrics=False)
        tq._release_request = self._release_held
        if hasattr(tq, "resolve_deferred_releases"):
            _one_rank_group()
            self.D.time = _TickClock(self.D.time, lambda: float(self.tick))
        return tq

    def _release_held(self, decode_req: Any) -> None:
        """DecodeTransferQueue._release_request's release_kv_cache (a held room's KV; _do_release frees
        its metadata row itself)."""
        decode_req.req.metadata_buffer_index = -1
        self._release(decode_req.req.bootstrap_room)

    def _receiver(self, room: int) -> Any:
        """The decode's receiver of a room (mooncake/conn.py MooncakeKVReceiver, made without its
        __init__, which bootstraps over HTTP): its own poll() and abort() run; it has published no
        bootstrap infos, so its abort sends no ABORT message (the driver relays the abort to the
        prefill)."""
        rc = object.__new__(self.conn.MooncakeKVReceiver)
        rc.kv_mgr, rc.bootstrap_room, rc.conclude_state, rc.init_time = self.mgr, room, None, None
        rc.abort_notified, rc._abort_generation = False, None  # 0.5.23's __init__ sets both
        rc.trace_ctx = _Nothing()
        # send_metadata's bootstrap message: one prefill rank, its zmq socket captured (the driver relays
        # the destination to the prefill itself)
        rc.bootstrap_infos = [{"is_dummy": False, "rank_ip": "10.0.1.1", "rank_port": 8998}]
        rc.bootstrap_addr, rc.required_dst_info_num, rc.session_id = "10.0.1.1:8998", 1, f"{self.name}:0"
        rc.chunk_staging_infos, rc._owns_bootstrap_room = [], True
        rc._lifecycle_lock = threading.Lock()
        sock = SimpleNamespace(send_multipart=lambda msg: self.sent.append({"metadata": msg}))
        rc._connect_to_bootstrap_server = lambda info: (sock, threading.Lock())
        return rc

    # --- the model forward (stub) ------------------------------------------------------------------
    def _forward(self, batch: Any, **kw: Any) -> Any:
        rt2t = self.pool.req_to_token
        decode = batch.forward_mode.is_decode()
        for k, req in enumerate(batch.reqs):
            row, n = req.kv.req_pool_idx, int(batch.seq_lens_cpu[k])
            lo = n - 1 if decode else int(batch.prefix_lens[k])
            att = rt2t[row, :lo].to(self.torch.int64)
            held = self.kv[att]
            t = self.truth.setdefault(req.bootstrap_room, {"sources": set(), "slots": 0})
            foreign = held[(held != 0) & (held != req.bootstrap_room)]
            t["sources"].update(foreign.tolist())
            t["slots"] += int(foreign.numel())
        self.kv[batch.out_cache_loc.to(self.torch.int64)] = self._out_rooms(batch)
        return SimpleNamespace(has_sampled_token_ids=False, extend_input_len_per_req=None, next_token_ids=None)

    def _out_rooms(self, batch: Any) -> Any:
        n = batch.out_lens
        rooms = [r.bootstrap_room for r in batch.reqs]
        return self.torch.tensor(np.repeat(rooms, n), dtype=self.torch.int64)

    def _run(self, reqs: list[Any], decode: bool, prefix: list[int], seq: list[int], out: Any) -> None:
        torch = self.torch
        batch = _Open(
            reqs=reqs,
            forward_mode=self.ForwardMode.DECODE if decode else self.ForwardMode.EXTEND,
            seq_lens=torch.tensor(seq, dtype=torch.int64),
            seq_lens_cpu=torch.tensor(seq, dtype=torch.int64),
            prefix_lens=prefix if not decode else None,
            out_cache_loc=out,
            out_lens=[s - p for s, p in zip(seq, prefix, strict=True)],
            extend_num_tokens=0 if decode else sum(s - p for s, p in zip(seq, prefix, strict=True)),
            spec_algorithm=SimpleNamespace(is_none=lambda: True),
            return_logprob=False,
            return_hidden_states=False,
            hicache_consumer_index=-1,
            input_ids=torch.zeros(len(reqs), dtype=torch.int64),  # token ids: the stub forward reads none
            enable_overlap=False,
        )
        batch.get_model_worker_batch = lambda: batch  # 0.5.11 hands the model worker this batch's copy
        type(self.sched).run_batch(self.sched, batch)  # the class's attribute: the plugin's hook around it

    # --- requests ----------------------------------------------------------------------------------
    def _req(self, room: int, rid: str, n: int) -> Any:
        r = SimpleNamespace(rid=rid, bootstrap_room=room, origin_input_ids=[0] * n, output_ids=[], to_finish=None,
                            finished_reason=None, prefix_len=0, is_chunked=0, time_stats=_Nothing(),
                            set_extend_input_len=lambda k: None, bootstrap_host="10.0.1.1",
                            pd_rebootstrap_forced_output_id=None, return_logprob=False,
                            return_sampling_mask=False, hidden_states_tensor=None, metadata_buffer_index=-1,
                            cached_tokens=0, cached_tokens_device=0, cached_tokens_host=0,
                            cached_tokens_storage=0, get_mm_token_counts=lambda: (0, 0, 0))  # fmt: skip
        if self.ReqKvInfo is not None:
            r.kv = self.ReqKvInfo()
        else:
            r.req_pool_idx, r.kv_allocated_len, r.kv_committed_len, r.kv = None, 0, 0, r
        self.reqs[room] = r
        return r

    def _row_slots(self, r: Any) -> list[int]:
        """The slots the request's row names (what its forward passes attend and write)."""
        n = int(r.kv.kv_allocated_len)
        return self.pool.req_to_token[r.kv.req_pool_idx, :n].to(self.torch.int64).tolist()

    def _slots_of_pages(self, pages: np.ndarray) -> np.ndarray:
        return (pages[:, None] * self.ps + np.arange(self.ps)).ravel() if self.ps > 1 else pages

    def _alloc_tokens(self, n: int) -> Any:
        torch = self.torch
        if self.ps == 1:
            return self.alloc.alloc(n)
        z = torch.tensor([0], dtype=torch.int64)
        m = torch.tensor([n], dtype=torch.int64)
        return self.alloc.alloc_extend(prefix_lens=z, prefix_lens_cpu=z, seq_lens=m, seq_lens_cpu=m,
                                       last_loc=torch.tensor([-1], dtype=torch.int64),
                                       extend_num_tokens=n)  # fmt: skip

    def _release(self, room: int) -> None:
        """The request's slots and row back: allocator.free of the row's slots (paged: by page, as the
        allocator itself does), then the pool's free (ChunkCache.cache_finished_req's two calls)."""
        r = self.reqs.pop(room, None)
        if r is not None and getattr(r, "metadata_buffer_index", -1) >= 0:
            self.meta_idx.free(r.metadata_buffer_index)
            r.metadata_buffer_index = -1
        if r is None or r.kv.req_pool_idx is None:
            return
        n = int(r.kv.kv_allocated_len)
        slots = self.pool.req_to_token[r.kv.req_pool_idx, :n].to(self.torch.int64)
        if n:
            self.alloc.free(slots)
        self.pool.free(r)

    # --- prefill commands --------------------------------------------------------------------------
    def prefill(self, room: int, rid: str, n: int, dst_pages: list[int], peer: tuple[str, int]) -> dict[str, Any]:
        """The prefill of `n` tokens (1: the placeholder of an over-length prompt), then its send: the
        room opened as CommonKVSender does, the decode's destination recorded as its TransferInfo
        (what the decode's metadata message carries) and the chunk queued by add_transfer_request."""
        r = self._req(room, rid, n)
        self.pool.alloc([r])
        loc = self._alloc_tokens(n)
        if loc is None:
            return {"ok": False}
        r.kv.kv_allocated_len = n
        self.pool.write((r.kv.req_pool_idx, slice(0, n)), loc)
        self._run([r], False, [0], [n], loc)
        # the first output token's metadata row (process_batch_result_disagg_prefill: set_buf before
        # the last chunk is sent), carried by RDMA with the last chunk: the driver delivers it to decode
        r.metadata_buffer_index, r.output_ids = self.meta_idx.alloc(), [1]
        self.meta.set_buf(r)
        meta = {k: v[r.metadata_buffer_index].clone() for k, v in vars(self.meta).items()
                if isinstance(v, self.torch.Tensor) and v.dim() >= 1 and v.shape[0] == self.meta_idx.size}  # fmt: skip
        m, KVPoll = self.mgr, self.KVPoll
        m.update_status(room, KVPoll.Bootstrapping)
        m.transfer_infos[room] = {f"{peer[0]}:{peer[1]}": self.conn.TransferInfo(
            room=room, endpoint=peer[0], dst_port=peer[1], mooncake_session_id=f"{peer[0]}:{peer[1] + 10000}",
            dst_kv_indices=np.array(dst_pages, np.int32), dst_aux_index=0, dst_state_indices=[],
            required_dst_info_num=1, is_dummy=False)}  # fmt: skip
        m.update_status(room, KVPoll.WaitingForInput)
        m.update_status(room, KVPoll.Transferring)
        src_pages = np.unique(loc.numpy() // self.ps).astype(np.int32)
        m.add_transfer_request(room, src_pages, slice(0, len(src_pages)), True, aux_index=0)
        chunks = []
        while not m.transfer_queues[0].empty():  # the transfer worker's queue: what it would write
            c = m.transfer_queues[0].get_nowait()
            dst = np.asarray(m.transfer_infos[c.room][f"{peer[0]}:{peer[1]}"].dst_kv_indices[c.index_slice], np.int64)
            chunks.append(self._slots_of_pages(dst).tolist())
            # the transfer worker counts a chunk at dequeue (its write now in flight): the drain ack of
            # an aborted room waits for it (mooncake/conn.py transfer_worker, _staging_outstanding)
            m._staging_outstanding[room] = m._staging_outstanding.get(room, 0) + 1
        return {"ok": True, "chunks": chunks, "meta": meta}

    def abort_notice(self, room: int, msg: list[bytes] | None) -> dict[str, Any]:
        """Decode's ABORT message (what its receiver's abort sent) reaches the prefill (0.5.23:
        mooncake/conn.py MooncakeKVManager._handle_abort_notification: the room turns Failed if still
        active; with the deferred release its ABORT_ACK waits until the room's chunks drained,
        _maybe_ack_drained_abort). 0.5.11 has no such message: the prefill never learns of the abort."""
        handle = getattr(self.mgr, "_handle_abort_notification", None)
        self.sent.clear()
        if handle is not None and msg is not None:
            handle(msg)
        return {"status": int(self.mgr.request_status.get(room, -1)), "acks": self._acks()}

    def _acks(self) -> list[list[bytes]]:
        """The ABORT_ACK messages this prefill sent since (captured _send_multipart_locked: addr, msg)."""
        return [list(x["multipart"][1]) for x in self.sent if "multipart" in x]

    def conclude(self, room: int, host: str, port: int) -> dict[str, Any]:
        """The transfer worker's end of the room: Success, which the manager turns into Failed where
        the room already failed; the status message goes to decode; the prefill releases the request."""
        self.sent.clear()
        m = self.mgr
        if room in m._staging_outstanding:  # the worker's chunks written: the room's writes drained
            m._staging_outstanding[room] -= 1
            if m.enable_deferred_decode_kv_release and hasattr(m, "_maybe_ack_drained_abort"):
                m._maybe_ack_drained_abort(room)  # an aborted room: its ABORT_ACK goes to decode now
            m._staging_outstanding.pop(room, None)
        acks = self._acks()
        if hasattr(self.mgr, "conclude_transfer"):  # 0.5.23: disaggregation/common/conn.py
            out = self.mgr.conclude_transfer(bootstrap_room=room, status=self.KVPoll.Success, targets=[(host, port)])
        else:  # 0.5.11: mooncake/conn.py transfer_worker's last chunk, then sync_status_to_decode_endpoint
            self.mgr.update_status(room, self.KVPoll.Success)
            out = self.mgr.check_status(room)
        self.mgr.request_status.pop(room, None)
        self.mgr.transfer_infos.pop(room, None)
        self._release(room)
        return {"status": int(out) if out is not None else -1, "acks": acks}

    # --- decode commands ---------------------------------------------------------------------------
    def prealloc(self, room: int, rid: str, n: int) -> dict[str, Any]:
        """The decode's pre-allocation (DecodePreallocQueue._pre_alloc), its metadata row
        (ReqToMetadataIdxAllocator.alloc) and the receiver's send_metadata of the destination pages
        and that row's index, as pop_preallocated does."""
        r = self._req(room, rid, n)
        room_left = self.alloc.available_size() >= n + self.ps and self.meta_idx.available_size() > 0
        if self.pool.available_size() < 1 or not room_left:
            self.reqs.pop(room)
            return {"ok": False}
        loc = self.queue._pre_alloc(r)
        r.metadata_buffer_index = self.meta_idx.alloc()
        self.mgr.update_status(room, self.KVPoll.Bootstrapping)
        self.mgr.update_status(room, self.KVPoll.WaitingForInput)
        self.mgr.required_prefill_response_num_table[room] = 1  # the receiver's _setup_bootstrap_infos
        self.mgr.prefill_response_tracker[room] = set()
        rc = self.receivers[room] = self._receiver(room)
        pages = np.unique(loc.numpy().astype(np.int64) // self.ps)
        rc.send_metadata(pages.astype(np.int32), r.metadata_buffer_index)
        return {"ok": True, "pages": pages.tolist(), "aux": r.metadata_buffer_index}

    def land(self, room: int, slots: list[int], meta: dict[str, Any] | None = None, aux: int = -1) -> dict[str, Any]:
        """The RDMA write of a transfer chunk: the slots now hold `room`'s KV, whoever holds them; with
        the last chunk, the metadata row prefill filled lands in the decode's row `aux` (the index
        send_metadata gave), whoever holds it now."""
        idx = self.torch.tensor(slots, dtype=self.torch.int64)
        holders = {rm for rm, r in self.reqs.items() if r.kv.req_pool_idx is not None}
        self.kv[idx] = room
        for name, row in (meta or {}).items():
            getattr(self.meta, name)[aux] = row
        return {"held_by_other": room not in holders}

    def status(self, room: int, status: int) -> dict[str, Any]:
        """The prefill's status message, as the decode thread applies it: 0.5.23
        CommonKVManager.apply_prefill_status (which drops it for a room already cleared); 0.5.11's
        decode_thread closure calls update_status, for a room it still tracks."""
        if hasattr(self.mgr, "apply_prefill_status"):
            self.mgr.apply_prefill_status(bootstrap_room=room, status=status, prefill_rank=0)
        elif self.inbox is not None:  # 0.5.11: the message as sync_status_to_decode_endpoint sends it
            self.inbox.deliver([str(room).encode("ascii"), str(status).encode("ascii"), b"0"])
        return {"poll": int(self.mgr.check_status(room)) if room in self.mgr.request_status else -1}

    def admit(self, room: int, out_len: int) -> dict[str, Any]:
        """pop_transferred: the room's receiver polled (its own poll()); on Success the transfer queue
        commits it (DecodeTransferQueue._commit_transfer_to_req: the metadata row read, the first token
        taken) and frees its metadata row; a request the commit aborted (prepare_abort: SGLang's own
        room check, or the guard in enforce) is released, else it joins the running batch. A refused
        request's truth is what its first forward pass would read now."""
        rc = self.receivers.pop(room, None)
        if rc is None or room not in self.mgr.request_status or rc.poll() != self.KVPoll.Success:
            return {"ok": False}
        r = self.reqs[room]
        dr = self.D.DecodeRequest(req=r, kv_receiver=rc, metadata_buffer_index=r.metadata_buffer_index)
        self.tq._commit_transfer_to_req(dr)
        self.mgr.request_status.pop(room, None)
        self.meta_idx.free(r.metadata_buffer_index)
        r.metadata_buffer_index = -1
        if r.finished_reason is not None:
            msg = str(getattr(r.finished_reason, "message", r.finished_reason))
            row = self._row_slots(r)
            held = self.kv[self.torch.tensor(row, dtype=self.torch.int64)]
            foreign = held[(held != 0) & (held != room)]
            self._release(room)
            return {"ok": False, "refused": "kv-forensics" in msg, "would": sorted(set(foreign.tolist())),
                    "row": row, "t": time.time()}  # fmt: skip
        self.running.append(room)
        self.out_left[room] = out_len
        return {"ok": True}

    def abort(self, room: int, release: bool, tick: int = 0) -> dict[str, Any]:
        """The client's abort of a request still in the transfer queue: the room turns Failed (the
        receiver's abort()), and its pages go back now (release) or when the driver says (deferred)."""
        rc = self.receivers.pop(room, None)
        self.sent.clear()
        self.tick = max(self.tick, tick)  # _defer_release's deadline counts from this tick
        if rc is not None and room in self.mgr.request_status:
            # 0.5.23: update_status(room, Failed) too, and ensure_abort_notified: the ABORT message (with
            # the deferred release, its drain-ack generation armed first); 0.5.11: its conclude_state only
            rc.abort()
        msg = next((list(x["metadata"]) for x in self.sent if "metadata" in x), None)
        if msg is None and rc is not None and hasattr(rc, "ensure_abort_notified"):
            # 0.5.23's abort always notifies the prefill (ensure_abort_notified); it logs a failure at debug
            raise RuntimeError(f"room {room}: the receiver's abort sent no ABORT message")
        r = self.reqs.get(room)
        hold = getattr(self.tq, "enable_deferred_kv_release", False) and self.mgr.enable_deferred_decode_kv_release
        if hold and not release and rc is not None and r is not None and getattr(rc, "abort_notified", False):
            # pop_transferred's Failed path with the deferred release: held by SGLang's own _defer_release
            # until resolve_deferred_releases finds the drain ack (or its timeout)
            dr = self.D.DecodeRequest(req=r, kv_receiver=rc, metadata_buffer_index=r.metadata_buffer_index)
            self.tq._defer_release(dr)
        else:
            self._release(room)
            if rc is not None:  # pop_transferred's Failed path: the receiver cleared (the room untracked)
                rc.clear()
        return {"ok": True, "abort": msg}

    def abort_acks(self, msgs: list[list[bytes]]) -> dict[str, Any]:
        """Prefill's ABORT_ACK messages, as the decode thread hands them to the manager (0.5.23
        CommonKVManager.handle_abort_ack_message; the thread's dispatch is the driver's)."""
        for msg in msgs:
            self.mgr.handle_abort_ack_message(msg)
        return {"ok": True}

    def resolve(self, tick: int) -> dict[str, Any]:
        """The scheduler loop's resolve_deferred_releases (0.5.23 decode.py, every event-loop pass): held
        rooms released once drained or timed out (in ticks). Returns how many are still held."""
        self.tick = tick
        if not hasattr(self.tq, "resolve_deferred_releases"):
            return {"held": 0}
        self.tq.resolve_deferred_releases()
        return {"held": self.tq.num_pending_deferred_releases()}

    def step(self) -> dict[str, Any]:
        """One decode step of the running batch through Scheduler.run_batch; returns the requests that
        ended (finished, or finished with an error by the guard) with what they read."""
        if not self.running:
            return {"ended": []}
        torch = self.torch
        reqs = [self.reqs[rm] for rm in self.running]
        seq = [int(r.kv.kv_allocated_len) + 1 for r in reqs]
        if self.ps == 1:
            out = self.alloc.alloc(len(reqs))
        else:
            rows = torch.tensor([r.kv.req_pool_idx for r in reqs], dtype=torch.int64)
            last = self.pool.req_to_token[rows, torch.tensor(seq) - 2].to(torch.int64)
            st = torch.tensor(seq, dtype=torch.int64)
            out = self.alloc.alloc_decode(seq_lens=st, seq_lens_cpu=st, last_loc=last)
        if out is None:
            return {"ended": [], "oom": True}
        rows_t = torch.tensor([r.kv.req_pool_idx for r in reqs], dtype=torch.int64)
        self.pool.write((rows_t, torch.tensor(seq, dtype=torch.int64) - 1), out.to(torch.int32))
        for r in reqs:
            r.kv.kv_allocated_len += 1
        self._run(reqs, True, [s - 1 for s in seq], seq, out)
        ended = []
        for r in reqs:
            room = r.bootstrap_room
            self.out_left[room] -= 1
            refused = r.to_finish is not None
            if refused or self.out_left[room] <= 0:
                t = self.truth.get(room, {"sources": set(), "slots": 0})
                ended.append({"room": room, "refused": refused, "sources": sorted(t["sources"]),
                              "slots": t["slots"], "t": time.time(), "left": self.out_left[room],
                              "row": self._row_slots(r) if refused else []})  # fmt: skip
                self.running.remove(room)
                self.out_left.pop(room)
                self._release(room)
        return {"ended": ended}

    def reset(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The next run in this process: the operator's variables of `spec` read again
        (forensics.sglang.config.load, hooks.configure), the runtime dropped so the first allocator
        call makes a new one (hooks._ensure), and a new setup. The driver closes the run before."""
        from forensics.sglang import config, hooks

        for k, v in spec["env"].items():
            os.environ[k] = v
        hooks.configure(config.load())
        hooks.install(None)
        self.setup(spec)
        return {"ok": True, "pid": os.getpid()}

    def close(self) -> dict[str, Any]:
        from forensics.sglang import hooks, targets

        rt = hooks.runtime()
        if rt is not None and rt.rec is not None:
            rt.write_metrics()
            rt.rec.close()
        return {"pid": os.getpid(), "applied": list(targets.APPLIED), "stood_in": self.stood_in,
                "files": [str(f) for f in (rt.rec.files if rt is not None and rt.rec is not None else [])],
                "stats": vars(rt.stats) if rt is not None else {}}  # fmt: skip


def paged_refusal(release: str) -> str:
    return (f"SGLang {release}'s PagedTokenToKVPoolAllocator runs alloc_extend through its Triton kernel only, "
            "which crashes under TRITON_INTERPRET=1 on CPU: page size 1 only on this release "
            "(tests/support/sglang_drive.py refuses it alike)")  # fmt: skip


def _server_args() -> Any:
    """What 0.5.11 reads of ServerArgs on these paths (_pre_alloc, run_batch), at their defaults."""
    return SimpleNamespace(disaggregation_decode_enable_radix_cache=False, enable_dp_attention=False,
                           disaggregation_transfer_backend="mooncake",
                           elastic_ep_backend=None)  # fmt: skip


class _TickClock:
    """decode.py's time module with monotonic() the driver's tick (the deferred release's timeout)."""

    def __init__(self, real: Any, now: Any) -> None:
        self._real, self.monotonic = getattr(real, "_real", real), now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _one_rank_group() -> None:
    """The default process group of this one rank (gloo, an in-memory store): all_reduce_flags over
    it returns the flags unchanged, as on a decode of attention TP 1."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def _publish_disagg() -> None:
    """The server args' disagg namespace as _pre_alloc reads it (runtime_context.get_disagg): what a
    server publishes at start, with --disaggregation-decode-enable-radix-cache at its default (off)."""
    try:
        from sglang.srt import runtime_context as rc
    except ImportError:  # 0.5.11: _pre_alloc reads scheduler.server_args instead
        return

    bags = rc._CONTEXT._config_bags or {}
    bags.setdefault("disagg", SimpleNamespace(disaggregation_decode_enable_radix_cache=False))
    rc._CONTEXT._config_bags = bags


def serve(conn: Connection, spec: dict[str, Any]) -> None:
    """The node process: set the operator's variables, start, then answer the driver's commands."""
    for k, v in spec["env"].items():
        os.environ[k] = v
    import logging

    logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)
    try:
        node = Node(spec)
        conn.send({"ok": True, "pid": os.getpid()})
    except Exception as err:  # noqa: BLE001 (the driver reports it)
        import traceback

        conn.send({"ok": False, "error": f"{type(err).__name__}: {err}\n{traceback.format_exc()}"})
        return
    while True:
        cmd, args = conn.recv()
        try:
            out = getattr(node, cmd)(*args)
        except Exception as err:  # noqa: BLE001
            import traceback

            out = {"error": f"{cmd}: {type(err).__name__}: {err}\n{traceback.format_exc()}"}
        conn.send(out)
        if cmd == "exit":
            return

"""The hooks on SGLang's own functions, by dotted path, and how they are applied.

Every hook is an AROUND hook `fn(original, self, *args, **kwargs)`: the shape of
sglang.srt.plugins.hook_registry.plugin_hook(target, type=HookType.AROUND) (python/sglang/srt/plugins/
hook_registry.py, in releases 0.5.11 and 0.5.23; absent from 0.4.9 and 0.5.4), so the same functions
serve the plugin path and the launcher (forensics.sglang.__main__), which patches them in directly.

Targets, and where each lives (python/sglang/srt/...):
- allocators: mem_cache/allocator.py (0.4.9 .. 0.5.11), mem_cache/allocator/{token,paged,base}.py
  (0.5.23): TokenToKVPoolAllocator.alloc / free, PagedTokenToKVPoolAllocator.alloc / alloc_extend /
  alloc_decode / free, BaseTokenToKVPoolAllocator.free_group_begin / free_group_end /
  merge_and_sort_free (merge_and_sort_free from 0.5.4 on);
- rows: mem_cache/memory_pool.py ReqToTokenPool.alloc / write / free (alloc takes the Req list from
  0.5.11 on, a count before);
- decode pre-allocation: disaggregation/decode.py DecodePreallocQueue._pre_alloc (all four releases);
- prefill send with its destination indices: disaggregation/mooncake/conn.py
  MooncakeKVManager.add_transfer_request (the chunk's destination pages are
  transfer_infos[room][session].dst_kv_indices[index_slice]);
- transfer completion, failure, abort: update_status(room, KVPoll) on the manager
  (mooncake/conn.py up to 0.5.4, disaggregation/common/conn.py CommonKVManager from 0.5.11);
- the reads of a forward pass: managers/scheduler.py Scheduler.run_batch (batch.reqs, their
  req_to_token rows up to seq_lens, batch.out_cache_loc).
A target a release lacks is skipped and named in the log (hooks_applied() lists what took).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from forensics.sglang import config as config_mod
from forensics.sglang.recorder import Recorder
from forensics.sglang.runtime import Runtime

log = logging.getLogger("forensics.sglang")

_rt: Runtime | None = None
_cfg: config_mod.Config | None = None
_local = threading.local()
APPLIED: list[str] = []
MISSING: list[str] = []
WHY: dict[str, str] = {}  # target -> why its module did not import (the first module tried that failed)


def runtime() -> Runtime | None:
    return _rt


def install(rt: Runtime | None) -> None:
    """Set the process's runtime (tests and the driver install one per simulated node in turn)."""
    global _rt
    _rt = rt


def from_config(cfg: config_mod.Config, page_size: int = 1, slots: int = 1 << 16) -> Runtime:
    out = Path(cfg.dir)
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, cfg.node, cfg.format, cfg.queue, cfg.rotate_events, cfg.flush_ms)
    ps = cfg.page_size or page_size
    return Runtime(cfg.node, ps, rec, cfg.guard, out / "alerts.jsonl", out / f"metrics-{cfg.node}.prom",
                   slots=slots)  # fmt: skip


def _np(x: Any) -> np.ndarray:
    if x is None:
        return np.zeros(0, np.int64)
    if hasattr(x, "detach"):
        return x.detach().to("cpu").numpy().astype(np.int64, copy=False).ravel()
    return np.asarray(x, dtype=np.int64).ravel()


def _ps(alloc: Any) -> int:
    return int(getattr(alloc, "page_size", 1) or 1)


def _ensure(alloc: Any) -> Runtime | None:
    rt = _rt
    if rt is None and _cfg is not None:  # the first allocator call: the ledger sized to its pool
        install(from_config(_cfg, _ps(alloc), int(getattr(alloc, "size", 0) or 0) + 2 * _ps(alloc) + 1))
        rt = _rt
    if rt is not None and rt.ps != _ps(alloc) and rt.stats.allocated_pages == 0:
        rt.ps = _ps(alloc)
    return rt


# --- allocators ------------------------------------------------------------------------------------
def h_alloc(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    out = original(self, *args, **kwargs)
    rt = _ensure(self)
    if rt is not None and out is not None:
        rt.on_alloc(_np(out))
    return out


def h_free(original: Callable[..., Any], self: Any, free_index: Any, *args: Any, **kwargs: Any) -> Any:
    # free_group_end calls free() again with the slots the group collected: those were logged when the
    # scheduler freed them (ownership ends at the call), so the inner call logs nothing
    rt = _ensure(self)
    if rt is not None and not getattr(_local, "in_group_end", False):
        rt.on_free(_np(free_index))
    return original(self, free_index, *args, **kwargs)


def h_free_group_end(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    _local.in_group_end = True
    try:
        return original(self, *args, **kwargs)
    finally:
        _local.in_group_end = False


def h_passthrough(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    # free_group_begin, merge_and_sort_free: they reorder the free list, no slot changes hands
    return original(self, *args, **kwargs)


# --- req_to_token rows -----------------------------------------------------------------------------
def _req_ids(req: Any) -> tuple[int, str]:
    room = getattr(req, "bootstrap_room", None)
    return (int(room) if room is not None else -1), str(getattr(req, "rid", ""))


def h_rows_alloc(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    out = original(self, *args, **kwargs)
    rt = _rt
    reqs = args[0] if args else kwargs.get("reqs")
    if rt is not None and out is not None and isinstance(reqs, list):
        for req, row in zip(reqs, out, strict=False):
            rt.bind_row(int(row), *_req_ids(req))
    return out


def h_rows_write(original: Callable[..., Any], self: Any, indices: Any, values: Any) -> Any:
    out = original(self, indices, values)
    rt = _rt
    if rt is None:
        return out
    if isinstance(indices, tuple) and len(indices) == 2 and isinstance(indices[0], int | np.integer):
        rt.on_row_write(int(indices[0]), _np(values))
    elif isinstance(indices, tuple) and len(indices) == 2:  # (rows, positions) of a batch: one slot each
        rows, vals = _np(indices[0]), _np(values)
        if rows.size == vals.size:
            rt.on_rows_write_batch(rows, vals)
    return out


def h_rows_free(original: Callable[..., Any], self: Any, arg: Any, *args: Any, **kwargs: Any) -> Any:
    rt = _rt
    if rt is not None:
        row = getattr(arg, "req_pool_idx", arg)
        if isinstance(row, int | np.integer):
            rt.unbind_row(int(row))
    return original(self, arg, *args, **kwargs)


# --- disaggregation --------------------------------------------------------------------------------
def h_pre_alloc(original: Callable[..., Any], self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode pre-allocation: the row gets the request's slots before any KV lands in them."""
    rt = _rt
    if rt is not None and getattr(req, "req_pool_idx", None) is not None:
        rt.bind_row(int(req.req_pool_idx), *_req_ids(req))
    out = original(self, req, *args, **kwargs)
    if rt is not None and getattr(req, "req_pool_idx", None) is not None:
        row = int(req.req_pool_idx)
        rt.bind_row(row, *_req_ids(req))
        n = len(req.origin_input_ids) if getattr(req, "origin_input_ids", None) is not None else 0
        if n:
            rt.on_row_write(row, _np(self.req_to_token_pool.req_to_token[row, :n]))
    return out


_pending: dict[int, list[tuple[str, np.ndarray]]] = {}


def h_add_transfer(original: Callable[..., Any], self: Any, bootstrap_room: int, kv_indices: Any, index_slice: Any,
                   *args: Any, **kwargs: Any) -> Any:  # fmt: skip
    """Prefill send: the chunk's destination pages, per decode session, waiting for the transfer's status."""
    rt = _rt
    if rt is not None:
        cfg = _cfg
        peers = cfg.peers if cfg is not None else {}
        for session, info in getattr(self, "transfer_infos", {}).get(bootstrap_room, {}).items():
            dst = getattr(info, "dst_kv_indices", None)
            if dst is None:
                continue
            pages = _np(dst[index_slice])
            host = f"{getattr(info, 'endpoint', session)}:{getattr(info, 'dst_port', '')}"
            _pending.setdefault(int(bootstrap_room), []).append((peers.get(host, host), pages))
    return original(self, bootstrap_room, kv_indices, index_slice, *args, **kwargs)


def h_update_status(original: Callable[..., Any], self: Any, bootstrap_room: int, status: Any) -> Any:
    """Success on the prefill side: the chunks landed (a transfer row per destination run); Failed
    (a transfer error or an abort): nothing landed that the sender knows of, the pending chunks go."""
    out = original(self, bootstrap_room, status)
    rt = _rt
    name = getattr(status, "name", str(status))
    if rt is not None and name in ("Success", "Failed") and int(bootstrap_room) in _pending:
        chunks = _pending.pop(int(bootstrap_room))
        if name == "Success":
            for peer, pages in chunks:
                slots = (pages[:, None] * rt.ps + np.arange(rt.ps)).ravel()
                rt.on_transfer(int(bootstrap_room), peer, slots)
    return out


# --- forward pass ----------------------------------------------------------------------------------
def batch_rows(pool: Any, reqs: list[Any], seq_lens: np.ndarray) -> list[np.ndarray]:
    rt2t = pool.req_to_token
    return [_np(rt2t[int(r.req_pool_idx), : int(n)]) for r, n in zip(reqs, seq_lens.tolist(), strict=True)]


def finish_with_error(req: Any, msg: str) -> None:
    """Enforce: the request ends with an error; SGLang's check_finished() turns to_finish into the
    finish reason before the batch's output is streamed (managers/schedule_batch.py Req.check_finished)."""
    try:
        from sglang.srt.managers.schedule_batch import FINISH_ABORT

        req.to_finish = FINISH_ABORT(msg, 500, "KVIntegrityError")
    except Exception:  # noqa: BLE001 (a stand-in Req in the tests, or a release whose FINISH_ABORT differs)
        req.to_finish = ("abort", msg)


def h_run_batch(original: Callable[..., Any], self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
    """Before the forward pass: each request's attended slots (its req_to_token row up to seq_lens,
    less the slots this batch writes) and the slots it writes. Only the row positions the runtime has
    not yet checked are read (Runtime.unchecked): in steady decode that is none, and the step costs
    the ledger's update of out_cache_loc alone, for the whole batch at once."""
    rt = _rt
    reqs = getattr(batch, "reqs", None) if batch is not None else None
    if rt is not None and reqs:
        mode = getattr(batch, "forward_mode", None)
        decode = bool(mode.is_decode()) if mode is not None and hasattr(mode, "is_decode") else False
        # the host copy where the release keeps one (no device sync for the lengths)
        lens = getattr(batch, "seq_lens_cpu", None)
        seq = _np(batch.seq_lens if lens is None else lens)
        out = _np(getattr(batch, "out_cache_loc", None))
        one = decode and out.size == len(reqs)  # a decode step: one new slot per request
        rt2t = self.req_to_token_pool.req_to_token
        rooms: list[int] = [getattr(r, "bootstrap_room", None) for r in reqs]  # type: ignore[misc]
        if None in rooms:  # a request without a transfer room (a prefill node's own, or no disaggregation)
            rooms = [-1 if x is None else x for x in rooms]
        rows = [r.req_pool_idx for r in reqs]
        end = seq - 1 if one else np.array([int(getattr(r, "prefix_len", 0) or 0) for r in reqs], np.int64)
        lo = rt.unchecked(rooms, end)
        # positions not yet checked: a request's first batch, or its slots written by another since
        atts = {k: (str(getattr(reqs[k], "rid", "")), _np(rt2t[int(rows[k]), int(lo[k]) : int(end[k])]))
                for k in np.flatnonzero(lo < end).tolist()}  # fmt: skip
        out_n = None
        if not one:
            outs = [_np(rt2t[int(w), int(e) : int(n)]) if e < n else _EMPTY
                    for w, e, n in zip(rows, end.tolist(), seq.tolist(), strict=True)]  # fmt: skip
            out_n = np.array([o.size for o in outs], np.int64)
            out = np.concatenate(outs)
        for k, v in rt.on_batch(decode, rooms, seq, atts, out, out_n):
            if rt.guard == "enforce":
                finish_with_error(reqs[k], f"KV integrity guard: {v.slots} attended slots hold another "
                                  f"request's KV ({v.kind})")  # fmt: skip
    return original(self, batch, *args, **kwargs)


_EMPTY = np.zeros(0, np.int64)


# --- targets ---------------------------------------------------------------------------------------
ALLOC = ("sglang.srt.mem_cache.allocator", "sglang.srt.mem_cache.allocator.token", "sglang.srt.mem_cache.allocator.paged",  # noqa: E501
         "sglang.srt.mem_cache.allocator.base")  # fmt: skip
TARGETS: list[tuple[tuple[str, ...], str, Callable[..., Any]]] = [
    (ALLOC, "TokenToKVPoolAllocator.alloc", h_alloc),
    (ALLOC, "TokenToKVPoolAllocator.free", h_free),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc_extend", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc_decode", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.free", h_free),
    (ALLOC, "BaseTokenToKVPoolAllocator.free_group_begin", h_passthrough),
    (ALLOC, "BaseTokenToKVPoolAllocator.free_group_end", h_free_group_end),
    (ALLOC, "BaseTokenToKVPoolAllocator.merge_and_sort_free", h_passthrough),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.alloc", h_rows_alloc),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.write", h_rows_write),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.free", h_rows_free),
    (("sglang.srt.disaggregation.decode",), "DecodePreallocQueue._pre_alloc", h_pre_alloc),
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVManager.add_transfer_request", h_add_transfer),
    (
        ("sglang.srt.disaggregation.common.conn", "sglang.srt.disaggregation.mooncake.conn"),
        "CommonKVManager.update_status",
        h_update_status,
    ),  # fmt: skip
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVManager.update_status", h_update_status),
    (("sglang.srt.managers.scheduler",), "Scheduler.run_batch", h_run_batch),
]


def resolve(modules: tuple[str, ...], attr: str, import_modules: bool = True) -> str | None:
    """The dotted path of `attr` in the first module that defines it itself (not by import)."""
    cls, meth = attr.split(".")
    for m in modules:
        try:
            mod = importlib.import_module(m) if import_modules else __import__("sys").modules.get(m)
        except Exception as err:  # noqa: BLE001 (a module that needs CUDA or a transfer engine on this host)
            WHY.setdefault(attr, f"{m}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            continue
        c = getattr(mod, cls, None) if mod is not None else None
        if c is not None and c.__module__ == m and meth in c.__dict__:
            return f"{m}.{attr}"
    return None


def _resolved() -> list[tuple[str, Callable[..., Any]]]:
    out, seen = [], set()
    APPLIED.clear()
    MISSING.clear()
    WHY.clear()
    for modules, attr, fn in TARGETS:
        # a second try: a module whose first import failed half-way on an import cycle (0.4.9's allocator
        # beside its memory_pool) imports on the next attempt
        path = resolve(modules, attr) or resolve(modules, attr)
        if path is not None:
            WHY.pop(attr, None)
        if path is None or path in seen:
            if path is None:
                MISSING.append(attr)
            continue
        seen.add(path)
        out.append((path, fn))
        APPLIED.append(path)
    if MISSING:
        log.info("kv-forensics: not hooked on this host (absent or not importable): %s", ", ".join(MISSING))
    return out


def register_with_sglang() -> list[str]:
    """SGLang 0.5.11+: register every target with the plugin hook registry (load_plugins applies them)."""
    from sglang.srt.plugins.hook_registry import HookType, plugin_hook

    for path, fn in _resolved():
        plugin_hook(path, type=HookType.AROUND)(fn)
    return list(APPLIED)


def apply_direct() -> list[str]:
    """Releases without the plugin framework (0.4.9, 0.5.4): patch the same AROUND hooks in place."""
    import functools
    import pkgutil

    for path, fn in _resolved():
        owner_path, name = path.rsplit(".", 1)
        owner = pkgutil.resolve_name(owner_path)
        orig = owner.__dict__[name]
        if getattr(orig, "__kvf_hooked__", False):
            continue

        def wrap(original: Callable[..., Any] = orig, hook: Callable[..., Any] = fn) -> Callable[..., Any]:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return hook(original, *args, **kwargs)

            wrapper.__kvf_hooked__ = True  # type: ignore[attr-defined]
            return wrapper

        setattr(owner, name, wrap())
    return list(APPLIED)


def configure(cfg: config_mod.Config) -> None:
    global _cfg
    _cfg = cfg

"""The hooks on SGLang's own functions (forensics.sglang.targets names their targets and applies them).

Every hook is an AROUND hook `fn(original, self, *args, **kwargs)`: the shape of
sglang.srt.plugins.hook_registry.plugin_hook(target, type=HookType.AROUND) (python/sglang/srt/plugins/
hook_registry.py, in releases 0.5.11 and 0.5.23; absent from 0.4.9 and 0.5.4), so the same functions
serve the plugin path and the launcher (forensics.sglang.__main__), which patches them in directly.
They translate SGLang's calls into the methods of the process's Runtime (forensics.sglang.runtime).
"""

from __future__ import annotations

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


_EMPTY = np.zeros(0, np.int64)


def _np(x: Any) -> np.ndarray:
    if x is None:
        return np.zeros(0, np.int64)
    if hasattr(x, "detach"):
        return x.detach().to("cpu").numpy().astype(np.int64, copy=False).ravel()
    return np.asarray(x, dtype=np.int64).ravel()


def _ps(alloc: Any) -> int:
    return int(getattr(alloc, "page_size", 1) or 1)


_broken: list[str] = []  # why the ledger could not be made (the guard then fails closed)
_said: set[str] = set()  # the fail-closed reasons already logged (each once)


def say_once(key: str, msg: str, exc: BaseException | None = None) -> None:
    if key not in _said:
        _said.add(key)
        log.error("kv-forensics: %s", msg, exc_info=exc)


off_reason: str | None = None  # why this process records nothing (its folder could not be made), or None
_faults: set[str] = set()  # hooks whose recording raised (said once each in the engine's log)


def _make(ps: int, slots: int) -> Runtime | None:
    """The process's runtime from the settings, made at the first hooked call that needs it (an
    allocator's, or a request's row: the scheduler takes a request's row before its first slots). A
    folder that cannot be made turns the plugin off for the process, said once: the engine runs on."""
    global off_reason
    if _cfg is None or off_reason is not None:
        return None
    try:
        install(from_config(_cfg, ps, slots))
    except Exception as err:  # noqa: BLE001 (an unwritable or missing folder, a full disk)
        off_reason = f"{_cfg.dir}: {type(err).__name__}: {err}"
        _broken.append(f"{type(err).__name__}: {err}")
        say_once("no ledger", f"no page events and no ledger in this process ({off_reason}): the engine runs "
                 "without them, and the guard fails closed on every decode request", err)  # fmt: skip
        return None
    return _rt


def _current() -> Runtime | None:
    """The runtime for a hook that sees no allocator (rows, transfers): made now if none is yet."""
    return _rt if _rt is not None or _cfg is None else _make(_cfg.page_size or 1, 1 << 16)


def _ensure(alloc: Any) -> Runtime | None:
    rt = _rt
    if rt is None and _cfg is not None:  # the first allocator call: the ledger sized to its pool
        rt = _make(_ps(alloc), int(getattr(alloc, "size", 0) or 0) + 2 * _ps(alloc) + 1)
    if rt is not None and rt.ps != _ps(alloc) and rt.stats.allocated_pages == 0:
        rt.ps = _ps(alloc)
    return rt


def _fault(where: str, err: BaseException) -> None:
    """A hook's recording raised: SGLang's call has run or runs anyway; the engine's log says so once."""
    if where not in _faults:
        _faults.add(where)
        log.error("kv-forensics: recording in %s failed (%s: %s); the engine goes on, events may be missing",
                  where, type(err).__name__, err, exc_info=err)  # fmt: skip


# --- allocators ------------------------------------------------------------------------------------
def h_alloc(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    out = original(self, *args, **kwargs)
    try:
        rt = _ensure(self)
        if rt is not None and out is not None:
            rt.on_alloc(_np(out))
    except Exception as err:  # noqa: BLE001 (the slots are the engine's: they are handed back whatever happens)
        _fault("alloc", err)
    return out


def h_free(original: Callable[..., Any], self: Any, free_index: Any, *args: Any, **kwargs: Any) -> Any:
    # free_group_end calls free() again with the slots the group collected: those were logged when the
    # scheduler freed them (ownership ends at the call), so the inner call logs nothing
    try:
        rt = _ensure(self)
        if rt is not None and not getattr(_local, "in_group_end", False):
            rt.on_free(_np(free_index))
    except Exception as err:  # noqa: BLE001
        _fault("free", err)
    return original(self, free_index, *args, **kwargs)


def h_free_group_end(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    _local.in_group_end = True
    try:
        return original(self, *args, **kwargs)
    finally:
        _local.in_group_end = False


def h_free_pages(original: Callable[..., Any], self: Any, page_ids: Any, *args: Any, **kwargs: Any) -> Any:
    """0.5.23's paged free by page id: free_segment (a request's release, the radix cache's evictions)
    calls it instead of free(); inside a free group it only collects, and free_group_end releases the
    collected pages without calling it again."""
    try:
        rt = _ensure(self)
        if rt is not None:
            pages, ps = _np(page_ids), _ps(self)
            rt.on_free((pages[:, None] * ps + np.arange(ps)).ravel())
    except Exception as err:  # noqa: BLE001
        _fault("free_page_ids", err)
    return original(self, page_ids, *args, **kwargs)


def h_passthrough(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    # free_group_begin, merge_and_sort_free: they reorder the free list, no slot changes hands
    return original(self, *args, **kwargs)


# --- req_to_token rows -----------------------------------------------------------------------------
def row_of(req: Any) -> int | None:
    """The request's req_to_token row: Req.req_pool_idx up to 0.5.11, its ReqKvInfo's in 0.5.23
    (managers/schedule_batch.py: Req.kv.req_pool_idx)."""
    kv = getattr(req, "kv", None)
    return getattr(req, "req_pool_idx", None) if kv is None else kv.req_pool_idx


def _req_ids(req: Any) -> tuple[int, str]:
    room = getattr(req, "bootstrap_room", None)
    return (int(room) if room is not None else -1), str(getattr(req, "rid", ""))


def h_rows_alloc(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    out = original(self, *args, **kwargs)
    try:
        reqs = args[0] if args else kwargs.get("reqs")
        rt = _current() if out is not None and isinstance(reqs, list) else None
        if rt is not None:
            for req, row in zip(reqs, out, strict=False):  # type: ignore[arg-type]
                rt.bind_row(int(row), *_req_ids(req))
    except Exception as err:  # noqa: BLE001
        _fault("ReqToTokenPool.alloc", err)
    return out


def h_rows_write(original: Callable[..., Any], self: Any, indices: Any, values: Any) -> Any:
    out = original(self, indices, values)
    if getattr(_local, "in_cache_indices", False):  # write_cache_indices reads its rows back once, after
        return out
    try:
        _rows_written(indices, values)
    except Exception as err:  # noqa: BLE001
        _fault("ReqToTokenPool.write", err)
    return out


def _rows_written(indices: Any, values: Any) -> None:
    rt = _current()
    if rt is None:
        return
    if isinstance(indices, tuple) and len(indices) == 2 and isinstance(indices[0], int | np.integer):
        rt.on_row_write(int(indices[0]), _np(values))
    elif isinstance(indices, tuple) and len(indices) == 2:  # (rows, positions) of a batch: one slot each
        rows, vals = _np(indices[0]), _np(values)
        if rows.size == vals.size:
            rt.on_rows_write_batch(rows, vals)


def h_rows_free(original: Callable[..., Any], self: Any, arg: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        rt = _current()
        if rt is not None:
            # free(req) from 0.5.11 on, free(row) before
            row = arg if isinstance(arg, int | np.integer) else row_of(arg)
            if isinstance(row, int | np.integer):
                rt.unbind_row(int(row))
    except Exception as err:  # noqa: BLE001
        _fault("ReqToTokenPool.free", err)
    return original(self, arg, *args, **kwargs)


# --- disaggregation --------------------------------------------------------------------------------
def h_pre_alloc(original: Callable[..., Any], self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode pre-allocation: the row gets the request's slots before any KV lands in them."""
    rt = None
    try:
        rt = _current()
        if rt is not None and row_of(req) is not None:
            rt.bind_row(int(row_of(req)), *_req_ids(req))  # type: ignore[arg-type]
    except Exception as err:  # noqa: BLE001
        _fault("_pre_alloc", err)
    out = original(self, req, *args, **kwargs)
    try:
        rt = rt or _current()
        if rt is not None and row_of(req) is not None:
            row = int(row_of(req))  # type: ignore[arg-type]
            rt.bind_row(row, *_req_ids(req))
            n = len(req.origin_input_ids) if getattr(req, "origin_input_ids", None) is not None else 0
            if n:
                rt.on_row_write(row, _np(self.req_to_token_pool.req_to_token[row, :n]))
            room = _req_ids(req)[0]
            sched = getattr(self, "scheduler", None)
            if room >= 0 and out is not None and not getattr(sched, "enable_hisparse", False):  # hisparse: host pages
                # the returned slots are the transfer's destination if the receiver's send_metadata sends
                # their pages (pop_preallocated), in the row from total_prefix_len (0.5.23) or prefix_len on
                named = dict(zip(("prefix_indices", "prefix_len", "total_prefix_len"), args, strict=False)) | kwargs
                pos0 = named.get("total_prefix_len") or named.get("prefix_len") or 0
                rt.on_stage(room, int(pos0), _np(out))
    except Exception as err:  # noqa: BLE001
        _fault("_pre_alloc", err)
    return out


def h_cache_indices(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An extend batch's rows as a GPU server writes them (mem_cache/allocation.py write_cache_indices,
    0.5.23): with a Triton-capable attention backend SGLang fills the rows with its kernel
    write_req_to_token_pool_triton, not ReqToTokenPool.write, so the row hook never sees them (a prefill
    node then logs no alloc and no free). The rows are read back once the call returns, request by
    request, prefix and new slots alike (a CPU server's inner write() calls are left to this too).
    A module-level function: the hook takes no `self` (the registry passes the call's own arguments)."""
    _local.in_cache_indices = True
    try:
        out = original(*args, **kwargs)
    finally:
        _local.in_cache_indices = False
    try:
        rt = _current()
        if rt is not None:
            names = ("out_cache_loc", "req_pool_indices_tensor", "req_pool_indices_cpu", "prefix_lens_tensor",
                     "prefix_lens_cpu", "seq_lens_tensor", "seq_lens_cpu", "extend_lens_tensor", "extend_lens_cpu",
                     "prefix_tensors", "req_to_token_pool")  # fmt: skip
            a = dict(zip(names, args, strict=False)) | kwargs
            pool, rows, lens = a["req_to_token_pool"], _np(a["req_pool_indices_cpu"]), _np(a["seq_lens_cpu"])
            table = pool.req_to_token
            for row, n in zip(rows.tolist(), lens.tolist(), strict=True):
                rt.on_row_write(row, _np(table[row, :n]))
    except Exception as err:  # noqa: BLE001
        _fault("write_cache_indices", err)
    return out


def configure(cfg: config_mod.Config) -> None:
    global _cfg, off_reason
    _cfg, off_reason = cfg, None
    _faults.clear()
    _broken.clear()
    _said.clear()  # a process configured anew says each of its reasons anew

"""Where the plugin's hooks (forensics.sglang.hooks) go, by dotted path, and how they are applied.

Targets, and where each lives (python/sglang/srt/...):
- allocators: mem_cache/allocator.py (0.4.9 .. 0.5.11), mem_cache/allocator/{token,paged,base}.py
  (0.5.23): TokenToKVPoolAllocator.alloc / free, PagedTokenToKVPoolAllocator.alloc / alloc_extend /
  alloc_decode / free / free_page_ids (0.5.23: free_segment frees through it, not free()),
  BaseTokenToKVPoolAllocator.free_group_begin / free_group_end / merge_and_sort_free
  (merge_and_sort_free from 0.5.4 on);
- rows: mem_cache/memory_pool.py ReqToTokenPool.alloc / write / free (alloc takes the Req list from
  0.5.11 on, a count before), and a PD decode node's own pool, disaggregation/decode.py
  DecodeReqToTokenPool (not a ReqToTokenPool subclass);
- decode pre-allocation: disaggregation/decode.py DecodePreallocQueue._pre_alloc (all four releases);
- prefill send with its destination indices: disaggregation/mooncake/conn.py
  MooncakeKVManager.add_transfer_request (the chunk's destination pages are
  transfer_infos[room][session].dst_kv_indices[index_slice]);
- transfer completion, failure, abort: update_status(room, KVPoll) on the manager
  (mooncake/conn.py up to 0.5.4, disaggregation/common/conn.py CommonKVManager from 0.5.11);
- an extend batch's rows as a GPU server writes them: mem_cache/allocation.py write_cache_indices
  (0.5.23; a module function: with a Triton-capable backend it fills the rows by a kernel, not by
  ReqToTokenPool.write), mem_cache/common.py write_cache_indices (0.5.11);
- the reads of a forward pass: managers/scheduler.py Scheduler.run_batch (batch.reqs, their
  req_to_token rows up to seq_lens, batch.out_cache_loc);
- what the transfer protocol tells decode (forensics.sglang.landing): the transferred length prefill
  writes into the metadata row (disaggregation/utils.py MetadataBuffers.set_buf, both releases), the
  destination decode sends (common/conn.py CommonKVReceiver.send_metadata; 0.5.11's
  MooncakeKVReceiver has its own), the
  commit of a Success (disaggregation/decode.py DecodeTransferQueue._commit_transfer_to_req, both), a
  prefill rank's terminal status and the abort's drain ack (disaggregation/common/conn.py
  CommonKVManager.apply_prefill_status and is_abort_release_safe, 0.5.23; 0.5.11 handles the status
  message inside MooncakeKVManager.start_decode_thread's closure: the hook on start_decode_thread taps
  the socket that closure reads);
- the sender's end of a room's transfer: disaggregation/common/conn.py CommonKVManager.conclude_transfer
  (0.5.23; forensics.sglang.drain; 0.5.11 has none).
A target a release lacks is skipped and named in the log (APPLIED lists what took, MISSING the rest).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from forensics.sglang.drain import h_conclude
from forensics.sglang.guard import h_run_batch
from forensics.sglang.hooks import (
    h_alloc,
    h_cache_indices,
    h_free,
    h_free_group_end,
    h_free_pages,
    h_passthrough,
    h_pre_alloc,
    h_rows_alloc,
    h_rows_free,
    h_rows_write,
)
from forensics.sglang.protocol import (
    h_commit,
    h_decode_thread,
    h_prefill_status,
    h_release_safe,
    h_send_metadata,
    h_set_buf,
)
from forensics.sglang.sending import h_add_transfer, h_update_status

log = logging.getLogger("forensics.sglang")

APPLIED: list[str] = []
MISSING: list[str] = []
WHY: dict[str, str] = {}  # target -> why its module did not import (the first module tried that failed)

ALLOC = ("sglang.srt.mem_cache.allocator", "sglang.srt.mem_cache.allocator.token", "sglang.srt.mem_cache.allocator.paged",  # noqa: E501
         "sglang.srt.mem_cache.allocator.base")  # fmt: skip
TARGETS: list[tuple[tuple[str, ...], str, Callable[..., Any]]] = [
    (ALLOC, "TokenToKVPoolAllocator.alloc", h_alloc),
    (ALLOC, "TokenToKVPoolAllocator.free", h_free),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc_extend", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.alloc_decode", h_alloc),
    (ALLOC, "PagedTokenToKVPoolAllocator.free", h_free),
    (ALLOC, "PagedTokenToKVPoolAllocator.free_page_ids", h_free_pages),
    (ALLOC, "BaseTokenToKVPoolAllocator.free_group_begin", h_passthrough),
    (ALLOC, "BaseTokenToKVPoolAllocator.free_group_end", h_free_group_end),
    (ALLOC, "BaseTokenToKVPoolAllocator.merge_and_sort_free", h_passthrough),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.alloc", h_rows_alloc),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.write", h_rows_write),
    (("sglang.srt.mem_cache.memory_pool",), "ReqToTokenPool.free", h_rows_free),
    # a decode node's pool in PD mode: a class of its own, not a ReqToTokenPool (0.5.11, 0.5.23)
    (("sglang.srt.disaggregation.decode",), "DecodeReqToTokenPool.alloc", h_rows_alloc),
    (("sglang.srt.disaggregation.decode",), "DecodeReqToTokenPool.write", h_rows_write),
    (("sglang.srt.disaggregation.decode",), "DecodeReqToTokenPool.free", h_rows_free),
    (("sglang.srt.disaggregation.decode",), "DecodePreallocQueue._pre_alloc", h_pre_alloc),
    (("sglang.srt.mem_cache.allocation", "sglang.srt.mem_cache.common"), "write_cache_indices", h_cache_indices),
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVManager.add_transfer_request", h_add_transfer),
    (
        ("sglang.srt.disaggregation.common.conn", "sglang.srt.disaggregation.mooncake.conn"),
        "CommonKVManager.update_status",
        h_update_status,
    ),  # fmt: skip
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVManager.update_status", h_update_status),
    (("sglang.srt.managers.scheduler",), "Scheduler.run_batch", h_run_batch),
    (("sglang.srt.disaggregation.utils",), "MetadataBuffers.set_buf", h_set_buf),
    (("sglang.srt.disaggregation.decode",), "DecodeTransferQueue._commit_transfer_to_req", h_commit),
    (("sglang.srt.disaggregation.common.conn",), "CommonKVReceiver.send_metadata", h_send_metadata),
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVReceiver.send_metadata", h_send_metadata),
    (("sglang.srt.disaggregation.common.conn",), "CommonKVManager.apply_prefill_status", h_prefill_status),
    (("sglang.srt.disaggregation.common.conn",), "CommonKVManager.is_abort_release_safe", h_release_safe),
    # 0.5.11: prefill's status message reaches decode only inside start_decode_thread's closure (its
    # socket tapped: forensics.sglang.protocol.StatusTap); 0.5.23 has apply_prefill_status (above)
    (("sglang.srt.disaggregation.mooncake.conn",), "MooncakeKVManager.start_decode_thread", h_decode_thread),
]
# the sender's end of a room's transfer (forensics.sglang.drain): after the transfer worker concludes
# it, nothing of the room is in flight (0.5.23 common/conn.py CommonKVManager.conclude_transfer)
TARGETS += [
    (("sglang.srt.disaggregation.common.conn",), "CommonKVManager.conclude_transfer", h_conclude),
]


def resolve(modules: tuple[str, ...], attr: str, import_modules: bool = True) -> str | None:
    """The dotted path of `attr` (Class.method, or a module's function) in the first module that
    defines it itself (not by import)."""
    cls, meth = attr.split(".") if "." in attr else ("", attr)
    for m in modules:
        try:
            mod = importlib.import_module(m) if import_modules else __import__("sys").modules.get(m)
        except Exception as err:  # noqa: BLE001 (a module that needs CUDA or a transfer engine on this host)
            missing = getattr(err, "name", None) if isinstance(err, ModuleNotFoundError) else None
            if not (missing and (m == missing or m.startswith(missing + "."))):  # else: not in this release
                WHY.setdefault(attr, f"{m}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            continue
        if not cls:
            f = getattr(mod, meth, None) if mod is not None else None
            if f is not None and getattr(f, "__module__", None) == m:
                return f"{m}.{attr}"
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

"""SGLang on a host without a GPU: the stubs that let its allocator and memory-pool modules import beside
CPU torch (`python -m forensics.sglang check --cpu`, the plugin's tests and benchmarks), and a stand-in
for the req-to-token pool where its module does not import. Nothing here is used by a server.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from types import SimpleNamespace
from typing import Any

# memory_pool imports sglang.srt.configs for the Mamba state types of hybrid pools; the package
# registers every model config with transformers, which needs torchvision and pinned releases: stubbed,
# the ReqToTokenPool touches none of it
STUB_CONFIGS = "sglang.srt.configs"


class _Stub(types.ModuleType):
    """An empty module whose every attribute is another (and callable, returning None)."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")

    def __call__(self, *a: object, **k: object) -> object:
        return None


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the stubbed packages (a top-level name of `roots`, or `packages` and their modules)
    give _Stub modules."""

    def __init__(self, roots: tuple[str, ...], packages: tuple[str, ...]) -> None:
        self.roots, self.packages = roots, packages

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        hit = name.split(".")[0] in self.roots or any(name == p or name.startswith(p + ".") for p in self.packages)
        return importlib.machinery.ModuleSpec(name, self, is_package=True) if hit else None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        m = _Stub(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module) -> None:  # noqa: ANN001
        return None


def install_stubs(roots: tuple[str, ...] = ("torchvision",), packages: tuple[str, ...] = ()) -> Any:
    """Stub `roots` (top-level packages: torchvision, which PyPI's builds do not load beside CPU torch)
    and `packages` (dotted), then import torch with the shim 0.4.9's utils needs
    (torch._C._cpu._is_amx_tile_supported, renamed in newer torch); returns torch. Used by
    import_sglang and by scripts/record_allocator_traces.py."""
    try:  # transformers decides before the stub exists that torchvision is absent (it reads its version)
        import transformers.utils.import_utils  # noqa: F401
    except ImportError:
        pass
    if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder(roots, packages))
    import torch

    if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
        torch._C._cpu._is_amx_tile_supported = lambda: False
    return torch


def import_sglang() -> Any:
    """SGLang's allocator and memory pool modules on a CPU-only host (install_stubs: torchvision, and
    sglang.srt.configs, STUB_CONFIGS)."""
    torch = install_stubs(("torchvision",), (STUB_CONFIGS,))
    import sglang

    try:
        from sglang.srt.mem_cache import allocator as A
    except ImportError:
        from sglang.srt.mem_cache.allocator import paged as _p  # 0.5.23's package
        from sglang.srt.mem_cache.allocator import token as _t

        A = SimpleNamespace(TokenToKVPoolAllocator=_t.TokenToKVPoolAllocator,
                            PagedTokenToKVPoolAllocator=_p.PagedTokenToKVPoolAllocator)  # fmt: skip
    try:
        from sglang.srt.mem_cache import memory_pool

        rows = memory_pool.ReqToTokenPool
    except ImportError:  # 0.5.11's memory_pool imports the model layers (deep_gemm, server_args, openai)
        rows = standin_rows(torch)
    return SimpleNamespace(sglang=sglang, torch=torch, A=A, rows=rows)


def standin_rows(torch: Any) -> type:
    """A stand-in for SGLang's ReqToTokenPool, copied from the class in
    python/sglang/srt/mem_cache/memory_pool.py of release 0.5.11 (req_to_token tensor, free_slots list,
    write, alloc(reqs), free(req); the memory-saver adapter left out), used where that module does not
    import on a CPU host (0.5.11's memory_pool imports the model layers: deep_gemm, server_args,
    openai). It is not SGLang's class: the plugin's row hooks are wrapped around its methods as
    HookRegistry would wrap the real ones (the same functions the plugin registers)."""
    from forensics.sglang import hooks

    class ReqToTokenPool:
        def __init__(self, size: int, max_context_len: int, device: str, enable_memory_saver: bool) -> None:
            self.req_to_token = torch.zeros((size + 1, max_context_len), dtype=torch.int32, device=device)
            self.free_slots = list(range(1, size + 1))

        def _write(self, indices: Any, values: Any) -> None:
            self.req_to_token[indices] = values

        def _alloc(self, reqs: list[Any]) -> list[int] | None:
            need = [r for r in reqs if r.req_pool_idx is None]
            if len(need) > len(self.free_slots):
                return None
            for r in need:
                r.req_pool_idx = self.free_slots.pop(0)
            return [r.req_pool_idx for r in reqs]

        def _free(self, req: Any) -> None:
            self.free_slots.append(req.req_pool_idx)
            req.req_pool_idx = None

        def write(self, indices: Any, values: Any) -> Any:
            return hooks.h_rows_write(ReqToTokenPool._write, self, indices, values)

        def alloc(self, reqs: list[Any]) -> Any:
            return hooks.h_rows_alloc(ReqToTokenPool._alloc, self, reqs)

        def free(self, req: Any) -> Any:
            return hooks.h_rows_free(ReqToTokenPool._free, self, req)

    return ReqToTokenPool

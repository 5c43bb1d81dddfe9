"""Import stand-ins for the packages SGLang's scheduler and decode modules (0.5.11, 0.5.23) import at module level
but never call on the paths the cluster driver runs (the OpenAI protocol types, the HTTP server, the
function-call parsers, process titles, 0.5.11's quantization packages and CUDA kernels), and for
sglang.srt.configs (model configs, registered with transformers at import). A stand-in is used only for
a package this venv lacks (ROOTS: the ones absent when install() runs).

A stand-in module's every attribute is a class that takes any arguments, can be subclassed (also as a
pydantic field type or a TypedDict base), called as a decorator (it returns the function), iterated
(empty) and asked for any attribute. None of it computes anything a test reads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

# top-level packages stood in when absent; sglang.srt.configs always (forensics.sglang.cpu.STUB_CONFIGS).
# sgl_kernel is CUDA kernels (0.5.11's scheduler imports memory_pool_host, which imports its kvcacheio);
# openai, and compressed_tensors on 0.5.11, scripts/sglang_test_venv.sh leaves out (it says why); the rest
# it installs (a venv it did not build may lack them)
ROOTS = ("sgl_kernel", "compressed_tensors", "gguf", "openai", "setproctitle", "partial_json_parser", "dill",
         "einops", "uvicorn", "fastapi")  # fmt: skip
PACKAGES = ("sglang.srt.configs",)


class _Meta(type):
    def __iter__(cls) -> Any:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)


def _inst_getattr(self: Any, name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _make(name)()


def _schema(cls: Any, *a: Any) -> Any:
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _make(name: str) -> Any:
    return _Meta(name, (), {
        "__init__": lambda self, *a, **k: None,
        "__call__": lambda self, *a, **k: a[0] if a and callable(a[0]) else self,
        "__iter__": lambda self: iter(()),
        "__getattr__": _inst_getattr,
        "__class_getitem__": classmethod(lambda cls, item: cls),
        "__init_subclass__": classmethod(lambda cls, **k: None),
        "__get_pydantic_core_schema__": classmethod(_schema),
    })  # fmt: skip


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        c = _make(name)
        setattr(self, name, c)
        return c


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]) -> None:
        self.roots = roots

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        hit = name.split(".")[0] in self.roots or any(name == p or name.startswith(p + ".") for p in PACKAGES)
        return importlib.machinery.ModuleSpec(name, self, is_package=True) if hit else None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        m = _Module(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module) -> None:  # noqa: ANN001
        return None


def install() -> list[str]:
    """Put the stand-ins in place (before SGLang is imported); returns the packages stood in."""
    from forensics.sglang.cpu import STUB_CONFIGS, install_stubs

    install_stubs(("torchvision",), (STUB_CONFIGS,))
    absent = {r for r in ROOTS if importlib.util.find_spec(r) is None}
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(absent))
    return sorted(absent)

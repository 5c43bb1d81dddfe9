"""tests/support/numba_once.py: a compile of a cached kernel holds the checkout's lock (so a second test
worker waits for the first's compiled code instead of compiling it again), and the kernel computes the
same."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

from filelock import FileLock, Timeout
from numba.core.dispatcher import Dispatcher

import forensics
from tests.support import numba_once

KERNEL = """
from numba import njit


@njit(cache=True)
def total(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
"""


def test_the_suite_runs_with_compiles_serialized() -> None:
    assert getattr(Dispatcher.compile, "_kvf_serialized", False)  # tests/conftest.py installed it
    lock = numba_once.lock_path(Path(forensics.__file__).parent)
    assert lock == numba_once.lock_path(Path(forensics.__file__).parent / ".." / "forensics")  # one per checkout
    before = Dispatcher.compile
    numba_once.serialize(lock)  # a second call wraps nothing twice
    assert Dispatcher.compile is before


def test_a_cached_kernel_compiles_under_the_lock_and_computes_the_same(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "kvf_numba_once_kernel.py").write_text(KERNEL)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("kvf_numba_once_kernel", tmp_path / "kvf_numba_once_kernel.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "kvf_numba_once_kernel", module)
    spec.loader.exec_module(module)

    lock = numba_once.lock_path(Path(forensics.__file__).parent)
    seen: list[bool] = []
    original = module.total._compiler.compile

    def compiling(*args, **kw):  # while numba compiles, another thread cannot take the lock
        result: list[bool] = []

        def probe() -> None:
            try:
                with FileLock(str(lock), timeout=0):
                    result.append(False)
            except Timeout:
                result.append(True)

        t = threading.Thread(target=probe)
        t.start()
        t.join()
        seen.extend(result)
        return original(*args, **kw)

    monkeypatch.setattr(module.total._compiler, "compile", compiling)
    assert module.total(10) == sum(i * i for i in range(10))
    assert seen == [True]

"""Each numba kernel compiled once per checkout, not once per test worker.

The kernels are `@njit(cache=True)`: a process that needs a signature first looks in the checkout's
`__pycache__` and compiles only what is not there. On a clean clone the cache is empty, and the two
xdist workers, which start on the same kind of test, compile the same signatures side by side (about
25 s of CPU each for the screening walk's or the allocator model's). `serialize()` makes every
outermost compile of a cached kernel in the test processes take one file lock, so the second worker
waits and then finds the first's compiled code in the cache (numba's `Dispatcher.compile` looks in
the cache before compiling). Nothing the kernels compute changes: only who compiles them.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lock_path(package: Path) -> Path:
    """The lock of one checkout's kernels (their cache is the checkout's own __pycache__)."""
    key = hashlib.sha256(str(package.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kvf-numba-{key}.lock"


def serialize(lock: Path) -> None:
    """Wrap numba's Dispatcher.compile: an outermost compile of a cached kernel holds `lock`."""
    from filelock import FileLock
    from numba.core.caching import NullCache
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.dispatcher import Dispatcher

    original: Callable[..., Any] = Dispatcher.compile
    if getattr(original, "_kvf_serialized", False):
        return
    held = FileLock(str(lock))  # re-entrant in its thread; another thread or process waits

    def compile(self: Dispatcher, sig: Any) -> Any:
        # A nested compile (this thread holds numba's own lock) goes through: taking the file lock
        # inside numba's lock could wait on a thread that waits for numba's lock.
        if isinstance(self._cache, NullCache) or global_compiler_lock.is_locked():
            return original(self, sig)
        with held:
            return original(self, sig)

    compile._kvf_serialized = True  # type: ignore[attr-defined]
    Dispatcher.compile = compile  # type: ignore[method-assign]

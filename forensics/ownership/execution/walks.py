"""The run's Ray cluster (on_cluster: one connection for every stage's tasks), and where the allocator
model's replays run (forensics.findings.allocator_walk): threads of this process, or, with investigate
--executor ray, a Ray task each.

Each replay is a compiled walk over one node's lifecycle arrays, a pure function of them: it gives the
same pairs wherever it runs, so the findings are the one-process run's. The pipeline names the run's
execution for the run (on_cluster); the walks' pool (walk_executor) follows it. A Ray task runs
only where the worker's code is the main process's (the code digest of forensics.ownership.execution.nodes).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

from forensics.errors import InputError
from forensics.ownership.execution.cluster import connect_ray, import_ray
from forensics.ownership.execution.nodes import Execution
from forensics.ownership.execution.tasks import code_digest

_EXECUTION: ContextVar[Execution | None] = ContextVar("walk_execution", default=None)


@contextmanager
def on_cluster(execution: Execution) -> Iterator[None]:
    """While the block runs, the allocator model's replays run where `execution` says; with Ray, one
    connection to its cluster (a local instance when no address is given) serves every stage's tasks, made
    here and closed at the end (each stage's own connect then finds it made)."""
    token = _EXECUTION.set(execution if execution.executor == "ray" else None)
    ray, started = None, False
    try:
        if execution.executor == "ray":
            ray = import_ray()
            started = connect_ray(ray, execution.ray_address, max(1, execution.workers or os.cpu_count() or 1))
        yield
    finally:
        if started and ray is not None:
            ray.shutdown()
        _EXECUTION.reset(token)


def walk_executor(threads: int) -> Executor:
    """The pool the replays are submitted to: `threads` threads of this process, or the Ray cluster."""
    execution = _EXECUTION.get()
    if execution is None:
        return ThreadPoolExecutor(max_workers=threads)
    return RayWalks(execution, threads)


@cache
def _worker_code() -> str:
    return code_digest()


def _call(code: str, fn: Callable[..., Any], *args: Any) -> Any:
    """One replay on a Ray worker, refused where the worker's code is not the main process's."""
    if _worker_code() != code:
        raise InputError(
            "a Ray worker given an allocator-model replay runs other kv-forensics code than this process: "
            "install the same kv-forensics version on every machine of the cluster"
        )
    return fn(*args)


class RayWalks(Executor):
    """An Executor whose submit runs the call as a Ray task (its future is the task's)."""

    def __init__(self, execution: Execution, threads: int) -> None:
        self._ray = import_ray()
        self._code = code_digest()
        self._started = connect_ray(self._ray, execution.ray_address, max(1, execution.workers or threads))
        self._remote = self._ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(_call)
        self._refs: list[Any] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        assert not kwargs, "the replays take positional arguments"
        ref = self._remote.remote(self._code, fn, *args)
        self._refs.append(ref)
        future: Future[Any] = ref.future()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            if cancel_futures or not wait:
                for ref in self._refs:
                    self._ray.cancel(ref, force=True)
            elif self._refs:
                self._ray.wait(self._refs, num_returns=len(self._refs))
        finally:
            self._refs.clear()
            if self._started:
                self._ray.shutdown()
                self._started = False

"""The Ray cluster, for every task kind that runs on it (the nodes' ownership tasks, the engine-log tasks,
the allocator model's replays): joining it (an address checked in seconds first, since ray.init retries
an unanswering one for half a minute), running tasks on it with bounded inputs in flight and the results
in order, and a failed task named by the node it was given."""

from __future__ import annotations

import importlib
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from forensics.errors import ForensicsError, InputError

PROBE_SECONDS = 2.0  # each of the address checks: a Ray head answers both within milliseconds


def probe_ray_address(address: str) -> None:
    """Refuse in seconds an address where no Ray head answers: ray.init would retry it for half a minute or
    more (a head's GCS that is down, a port of something else). `auto` (the cluster this machine's
    `ray start` joined) is left to Ray, which answers at once; `ray://` (Ray Client) gets the TCP check."""
    import_ray()
    if address == "auto":
        return
    client = address.startswith("ray://")
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InputError(
            f"--ray-address {address!r}: expected HOST:PORT (the head's port, 6379 unless `ray start --head` "
            "was given another), ray://HOST:PORT or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as err:
        raise InputError(
            f"--ray-address {address}: no Ray head answers there ({err.strerror or err}); "
            "start one with `ray start --head --port PORT` or check the address"
        ) from None
    if not client:
        _probe_gcs(address)


def _probe_gcs(address: str) -> None:
    """Asks the head's GCS for its cluster id, which a Ray head answers at once; in a thread, so that a
    listener that never answers costs PROBE_SECONDS, not a hang."""
    # by name: ray._raylet is compiled, and what mypy sees of it differs by release (2.60 shows no GcsClient)
    GcsClient = getattr(importlib.import_module("ray._raylet"), "GcsClient")  # noqa: B009

    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            GcsClient(address=address)
            outcome.append(None)
        except Exception as err:
            outcome.append(err)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(PROBE_SECONDS)
    if not outcome:
        raise InputError(f"--ray-address {address}: something listens there but does not answer as a Ray head")
    if outcome[0] is not None:
        raise InputError(
            f"--ray-address {address}: what listens there does not answer as a Ray head: {_first_line(outcome[0])}"
        )


def import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise InputError("--executor ray needs Ray: pip install 'kv-forensics[ray]'") from err
    return ray


def connect_ray(ray: Any, address: str | None, workers: int) -> bool:
    """Joins the cluster at `address` (else starts a local Ray instance of `workers` CPUs); True when this
    call connected (and so disconnects at the end)."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        probe_ray_address(address)
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = max(1, workers)
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise InputError(f"--executor ray: cannot join {where}: {_first_line(err)}") from None
    return True


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def task_failed(ray: Any, err: Exception, node: str) -> Exception:
    """The error a failed Ray task becomes: it names the node the task was analysing; the task's own
    error keeps its class (an InputError stays one), Ray's own failures (a worker killed, a node lost)
    become RuntimeError."""
    cause = getattr(err, "cause", None) if isinstance(err, ray.exceptions.RayTaskError) else None
    if isinstance(cause, ForensicsError):
        return type(cause)(f"the Ray task analysing node {node}: {cause}")
    what = f"{type(cause).__name__}: {_first_line(cause)}" if cause is not None else _first_line(err)
    return RuntimeError(f"the Ray task analysing node {node} failed: {what}")


def on_ray(
    fn: Callable[..., dict[str, Any]],
    tasks: Sequence[Any],
    code: str,
    inputs: Callable[[Any, Any], list[Any]],
    given: Callable[[Any], str],
    address: str | None,
    workers: int,
    keep: Callable[[Any, dict[str, Any]], dict[str, Any]] = lambda _task, result: result,
) -> list[dict[str, Any]]:
    """fn(task, code, *inputs(ray, task)) for each task (each has a .node) on the cluster, the
    results (through keep, as each arrives) in the tasks' order. At most two tasks per worker are in
    flight, so that the object store does not hold every task's inputs at once; a failed task is named by
    its node, a worker that runs other code than this process is refused (given names what it was given)."""
    if not tasks:
        return []
    ray = import_ray()
    started = connect_ray(ray, address, workers)
    results: list[dict[str, Any]] = [{} for _ in tasks]
    pending: dict[Any, int] = {}
    try:
        # SPREAD: the tasks go to as many machines as have a free CPU, memory is spread with them
        remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(fn)
        queue = iter(enumerate(tasks))
        while True:
            for i, task in queue:
                pending[remote.remote(task, code, *inputs(ray, task))] = i
                if len(pending) >= 2 * workers:
                    break
            if not pending:
                break
            [ref], _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as err:
                raise task_failed(ray, err, tasks[i].node) from None
            if result.pop("code") != code:
                raise InputError(
                    f"the Ray worker on host {result['host']} (Ray node {result['ray_node']}), given "
                    f"{given(tasks[i])}, runs other kv-forensics code than this process: install the same "
                    "kv-forensics version on every machine of the cluster"
                )
            results[i] = keep(tasks[i], result)
    finally:
        for ref in pending:  # a failed or interrupted run stops the tasks still under way
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
    return results

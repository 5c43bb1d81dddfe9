"""The guard fails closed (#48): with no ledger, or a check that raises, enforce refuses the request and
observe alarms, the reason is logged once, the forward pass and the allocator go on, and nothing
reaches the scheduler loop."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.sglang_plugin.conftest import need_sglang

need_sglang()


class _Decode:
    def is_decode(self) -> bool:
        return True


def _batch(rooms: list[int]) -> Any:
    reqs = [SimpleNamespace(rid=f"r{r}", bootstrap_room=r, req_pool_idx=k, to_finish=None) for k, r in enumerate(rooms)]
    return SimpleNamespace(reqs=reqs, forward_mode=_Decode(), seq_lens=np.array([3] * len(rooms)),
                           out_cache_loc=np.arange(len(rooms)) + 100)  # fmt: skip


@pytest.fixture
def plugin(tmp_path: Path) -> Any:
    from forensics.sglang import config, hooks

    yield hooks, config, tmp_path
    hooks.install(None)
    hooks.configure(None)  # type: ignore[arg-type]
    hooks._broken.clear()
    hooks._said.clear()


def _run(hooks: Any, batch: Any) -> list[str]:
    from forensics.sglang import guard

    ran: list[str] = []
    sched = SimpleNamespace(req_to_token_pool=SimpleNamespace(req_to_token=np.zeros((4, 8), np.int64)))
    guard.h_run_batch(lambda s, b: ran.append("forward"), sched, batch)
    return ran


@pytest.mark.parametrize("guard", ["enforce", "observe"])
def test_no_ledger_fails_closed_and_the_allocator_goes_on(plugin: Any, guard: str, caplog: Any) -> None:
    """The output folder cannot be made: the allocation still succeeds (no slot lost), the ledger is
    missing, and every decode request is refused (enforce) or alarmed (observe), logged once."""
    from forensics.sglang.cpu import import_sglang

    hooks, config, tmp = plugin
    (tmp / "file").write_text("")
    hooks.configure(config.Config(dir=str(tmp / "file" / "out"), node="decode-0", guard=guard))
    sg = import_sglang()
    a = sg.A.TokenToKVPoolAllocator(64, sg.torch.float16, "cpu", None, True)
    with caplog.at_level(logging.ERROR, logger="forensics.sglang"):
        got = [hooks.h_alloc(type(a).alloc, a, 4) for _ in range(3)]
        assert all(g is not None and len(g) == 4 for g in got) and a.available_size() == 64 - 12
        assert hooks.runtime() is None and hooks._broken
        b1, b2 = _batch([11, 12]), _batch([13])
        assert _run(hooks, b1) == ["forward"] and _run(hooks, b2) == ["forward"]
    refused = [r.to_finish is not None for r in b1.reqs + b2.reqs]
    assert refused == [guard == "enforce"] * 3
    if guard == "enforce":
        assert "kv-forensics" in str(b1.reqs[0].to_finish) and "no ledger" in str(b1.reqs[0].to_finish)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("no ledger" in x and "fails closed" in x for x in lines) == 1  # logged once, not per batch


@pytest.mark.parametrize("guard", ["enforce", "observe"])
def test_a_raising_check_never_reaches_the_scheduler_loop(plugin: Any, guard: str, caplog: Any) -> None:
    from forensics.sglang.runtime import Runtime

    hooks, config, tmp = plugin
    rt = Runtime("decode-0", 1, None, guard, tmp / "alerts.jsonl", tmp / "metrics.prom")

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("ledger corrupted")

    rt.on_batch = boom  # type: ignore[method-assign]
    hooks.install(rt)
    with caplog.at_level(logging.ERROR, logger="forensics.sglang"):
        b = _batch([21, 22])
        assert _run(hooks, b) == ["forward"]  # no exception; the batch still runs
        _run(hooks, _batch([23]))
    assert [r.to_finish is not None for r in b.reqs] == [guard == "enforce"] * 2
    assert rt.stats.by_kind == {"guard_error": 3}  # observe: each request alarmed
    assert (tmp / "alerts.jsonl").read_text().count('"kind": "exposure"') == 3
    assert sum("ledger corrupted" in r.getMessage() for r in caplog.records) == 1


def test_a_raising_commit_check_refuses_at_the_commit(plugin: Any) -> None:
    from forensics.sglang import protocol
    from forensics.sglang.runtime import Runtime

    hooks, config, tmp = plugin
    rt = Runtime("decode-0", 1, None, "enforce")
    rt.on_commit = lambda *a: (_ for _ in ()).throw(ValueError("bad"))  # type: ignore[method-assign]
    hooks.install(rt)
    req = SimpleNamespace(rid="r1", bootstrap_room=31, req_pool_idx=0, finished_reason=None, origin_input_ids=[1])
    q = SimpleNamespace(metadata_buffers=None, scheduler=None)
    protocol.h_commit(lambda s, d: None, q, SimpleNamespace(req=req, metadata_buffer_index=0))
    assert req.finished_reason is not None and "kv-forensics" in str(req.finished_reason)

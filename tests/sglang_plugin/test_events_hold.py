"""Events as a server produces them, on SGLang's real allocator and req-to-token pool (0.5.23 on CPU):
- a node's first request: the scheduler takes its row (ReqToTokenPool.alloc) before any slot, so the
  runtime is made there, and that request's allocation is attributed like every later one;
- a GPU server's extend rows: write_cache_indices fills them by its Triton kernel, not by
  ReqToTokenPool.write (stubbed here: the kernel needs a GPU; it writes the same rows); the hook reads
  them back, so a prefill node logs its allocations (and so its frees);
- page size 16: a page is logged once, when a request takes it, not at every decode step that writes
  into it (alloc_decode hands out the rest of a request's last page);
- an output folder that cannot be made: the allocator's call returns its slots, the engine's log says
  why once, nothing is recorded.
The expectations are counted from the calls each test makes (pages a request's lengths need, slots
the allocator returned), not from the plugin."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.sglang_plugin.conftest import need_sglang

need_sglang()

PS = 16


@pytest.fixture
def any_sg() -> Any:
    """The installed release, its hooks applied (0.5.11: forensics.sglang.cpu's stand-in rows)."""
    from forensics.sglang import hooks
    from forensics.sglang.cpu import import_sglang
    from tests.support.sglang_drive import apply_hooks

    s = import_sglang()
    apply_hooks()
    hooks.install(None)
    yield s
    hooks.install(None)
    hooks.configure(None)  # type: ignore[arg-type]


@pytest.fixture
def sg(any_sg: Any) -> Any:
    """0.5.23: the real ReqToTokenPool, the torch-native paged allocator and mem_cache/allocation.py."""
    if not any_sg.rows.__module__.startswith("sglang") or not any_sg.sglang.__version__.startswith("0.5.23"):
        pytest.skip(f"SGLang {any_sg.sglang.__version__}: the real ReqToTokenPool and allocation module of 0.5.23")
    return any_sg


def _req(room: int) -> Any:
    from types import SimpleNamespace

    from tests.support.sglang_drive import _Kv

    r = SimpleNamespace(rid=f"r{room}", bootstrap_room=room, kv=_Kv(), req_pool_idx=None)
    from forensics.sglang.cpu import import_sglang

    if not import_sglang().rows.__module__.startswith("sglang"):  # the stand-in keeps the row on the Req
        del r.kv
    else:
        del r.req_pool_idx
    return r


def _events(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for f in sorted((out / "pages").glob("*.jsonl")) for x in f.read_text().splitlines()]


def _paged(sg: Any, pages: int = 64) -> Any:
    a = sg.A.PagedTokenToKVPoolAllocator(pages * PS, PS, sg.torch.float16, "cpu", None, False)
    a.use_triton_kernels = False  # the torch-native twins of the kernels, as on a CPU platform
    return a


def test_a_nodes_first_request_is_attributed(any_sg: Any, tmp_path: Path) -> None:
    sg = any_sg
    from forensics.sglang import config, hooks

    hooks.configure(config.load({"KVF_SGLANG_DIR": str(tmp_path), "KVF_SGLANG_NODE": "decode-0"}))
    pool = sg.rows(8, 256, "cpu", False)
    alloc = sg.A.TokenToKVPoolAllocator(1024, sg.torch.float16, "cpu", None, False)
    slots = {}
    for room in (11, 12):  # as the scheduler goes: the request's row, then its slots, then the row's write
        req = _req(room)
        (row,) = pool.alloc([req])
        slots[room] = alloc.alloc(5 if room == 11 else 3)
        pool.write((row, slice(0, len(slots[room]))), slots[room])
    rt = hooks.runtime()
    assert rt is not None and rt.rec is not None
    rt.rec.close()
    got = {(e["room"], e["start"], e["end"]) for e in _events(tmp_path) if e["op"] == "alloc"}
    want = {(room, int(s[0]), int(s[-1]) + 1) for room, s in slots.items()}  # each a contiguous run here
    assert got == want


def test_page_size_16_logs_a_page_once_not_every_decode_step(sg: Any, tmp_path: Path) -> None:
    from forensics.sglang import hooks
    from forensics.sglang.recorder import Recorder
    from forensics.sglang.runtime import Runtime

    torch = sg.torch
    rt = Runtime("decode-0", PS, Recorder(tmp_path, "decode-0", "jsonl", start=False), "off")
    hooks.install(rt)
    pool, alloc = sg.rows(8, 512, "cpu", False), _paged(sg)
    prompts = {21: 20, 22: 16, 23: 7}
    rows = {}
    for room, n in prompts.items():
        (rows[room],) = pool.alloc([_req(room)])
        z, L = torch.tensor([0]), torch.tensor([n])
        out = alloc.alloc_extend(z, z, L, L, torch.tensor([-1]), n)
        pool.write((rows[room], slice(0, n)), out)
    idx = torch.tensor([rows[r] for r in prompts])
    seq = torch.tensor(list(prompts.values()))
    steps = 40
    for _ in range(steps):  # decode steps as alloc_for_decode_default makes them (paged)
        last = pool.req_to_token[idx, seq - 1].to(torch.int64)
        out = alloc.alloc_decode(seq + 1, seq + 1, last)
        pool.write((idx, seq), out.to(torch.int32))
        seq = seq + 1
    rt.rec.close()
    allocs = [e for e in _events(tmp_path) if e["op"] == "alloc"]
    # a run of pages taken at once is one event: counted by page
    taken = [(e["room"], p) for e in allocs for p in range(e["start"], e["end"], PS)]
    pages = {room: -(-(n + steps) // PS) for room, n in prompts.items()}  # pages each request's length needs
    assert len(taken) == len(set(taken)) == sum(pages.values()) == rt.stats.allocated_pages
    assert all(e["start"] % PS == 0 and e["end"] % PS == 0 for e in allocs)
    for room, n in pages.items():
        assert sum(r == room for r, _ in taken) == n


def test_rows_a_gpu_server_writes_by_kernel_are_attributed(
    sg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sglang.srt.mem_cache import allocation

    from forensics.sglang import hooks, targets
    from forensics.sglang.recorder import Recorder
    from forensics.sglang.runtime import Runtime

    assert "sglang.srt.mem_cache.allocation.write_cache_indices" in targets.APPLIED
    torch = sg.torch

    class Kernel:  # write_req_to_token_pool_triton's effect (mem_cache/allocation.py), without a GPU
        def __getitem__(self, grid: Any) -> Any:
            def run(table: Any, rows: Any, _ptrs: Any, pre: Any, seq: Any, ext: Any, out: Any, _w: int) -> None:
                pt = 0
                for r, p, s, e in zip(rows.tolist(), pre.tolist(), seq.tolist(), ext.tolist(), strict=True):
                    table[r, p:s] = out[pt : pt + e]
                    pt += e

            return run

    monkeypatch.setattr(allocation, "attention_backends", lambda: ("triton", "triton"))
    monkeypatch.setattr(allocation, "support_triton", lambda backend: True)
    monkeypatch.setattr(allocation, "write_req_to_token_pool_triton", Kernel())
    rt = Runtime("prefill-0", PS, Recorder(tmp_path, "prefill-0", "jsonl", start=False), "off", role="prefill")
    hooks.install(rt)
    pool, alloc = sg.rows(8, 512, "cpu", False), _paged(sg)
    lens = {31: 40, 32: 16}
    reqs = [_req(room) for room in lens]
    rows = pool.alloc(reqs)
    n = torch.tensor(list(lens.values()))
    z = torch.zeros(len(lens), dtype=torch.int64)
    out = alloc.alloc_extend(z, z, n, n, torch.tensor([-1, -1]), int(n.sum()))
    r = torch.tensor(rows)
    allocation.write_cache_indices(out, r, r, z, z, n, n, n, n, [torch.zeros(0, dtype=torch.int64)] * 2, pool)
    for req in reqs:  # the request's release frees its pages (free_segment -> free_page_ids, 0.5.23)
        row = req.kv.req_pool_idx
        alloc.free_segment(pool.req_to_token[row, : lens[req.bootstrap_room]].to(torch.int64), start_pos=0)
        pool.free(req)
    rt.rec.close()
    ev = _events(tmp_path)
    got = {op: sorted((e["room"], p) for e in ev if e["op"] == op for p in range(e["start"], e["end"], PS))
           for op in ("alloc", "free")}  # fmt: skip
    pt, want = 0, []
    for room, k in lens.items():  # the pages of the slots the allocator returned to each request
        want += [(room, p * PS) for p in sorted(set((out[pt : pt + k] // PS).tolist()))]
        pt += k
    assert got["alloc"] == sorted(want) and got["free"] == sorted(want)


def test_an_output_folder_that_cannot_be_made_leaves_the_allocator_working(
    any_sg: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sg = any_sg
    from forensics.sglang import config, hooks

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    hooks.configure(config.load({"KVF_SGLANG_DIR": str(blocker / "kvf"), "KVF_SGLANG_NODE": "decode-0"}))
    alloc = sg.A.TokenToKVPoolAllocator(4096, sg.torch.float16, "cpu", None, False)
    with caplog.at_level(logging.ERROR, logger="forensics.sglang"):
        got = [alloc.alloc(100) for _ in range(3)]
        alloc.free(got[0])
    assert all(g is not None and len(g) == 100 for g in got)
    assert len(np.unique(np.concatenate([g.numpy() for g in got]))) == 300
    assert int(alloc.available_size()) == 4096 - 200  # nothing lost: the freed 100 are back
    assert hooks.runtime() is None and hooks.off_reason is not None
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "not-a-folder" in errors[0] and "the engine runs without them" in errors[0]

"""The model of vLLM's block pool (forensics.engines.vllm_allocator) replays every trace recorded from
vLLM's own BlockPool and KVCacheManager (scripts/record_vllm_block_traces.py) with the same result,
call for call: the blocks each call hands out or hits (or its failure) and the whole free queue after
every call. A property test holds the model's invariants on workloads no trace has."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.engines import vllm_allocator as va

TRACES = Path(__file__).parents[1] / "data" / "vllm_block_traces"
FILES = sorted(TRACES.glob("*.json.gz"))


def _expand(runs: list[list[int]]) -> list[int]:
    return [s for first, n in runs for s in range(first, first + n)]


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _replay_pool(release: str, trace: dict[str, Any]) -> None:
    cfg = trace["config"]
    pool = va.BlockPool(cfg["num_blocks"], cfg["enable_caching"], release)
    for i, (op, args, want, free) in enumerate(trace["ops"]):
        got: Any = None
        if op == "new":
            try:
                got = pool.get_new_blocks(args)
            except ValueError:
                got = None
        elif op == "touch":
            pool.touch(args)
        elif op == "free":
            pool.free_blocks(args)
        elif op == "cache":
            pool.cache_full_blocks(args[0], args[1])
        elif op == "lookup":
            got = pool.get_cached_block(args)
        elif op == "evict":
            pool.evict_blocks(args)
        elif op == "reset":
            got = pool.reset_prefix_cache()
        else:
            raise AssertionError(f"unknown op {op}")
        assert got == want, f"op {i} {op}{args}: model {got} != vLLM {want}"
        assert pool.free_order() == _expand(free), f"op {i} {op}{args}: free queue differs"


def _replay_manager(release: str, trace: dict[str, Any]) -> None:
    cfg = trace["config"]
    mgr = va.KVCacheManager(cfg["num_blocks"], cfg["block_size"], cfg["enable_caching"], cfg["max_model_len"], release)
    for i, (op, args, want, free) in enumerate(trace["ops"]):
        got: Any = None
        if op == "arrive":
            got = list(mgr.arrive(*args))
        elif op == "step":
            got = mgr.step(*args)
        elif op == "finish":
            mgr.finish(args)
        else:
            raise AssertionError(f"unknown op {op}")
        assert got == want, f"op {i} {op}: model {got} != vLLM {want}"
        assert mgr.pool.free_order() == _expand(free), f"op {i} {op}: free queue differs"


def test_traces_cover_the_releases_and_the_cases() -> None:
    seen: dict[str, set[str]] = {}
    for path in FILES:
        data = _load(path)
        cases = seen.setdefault(data["header"]["vllm"], set())
        for tr in data["traces"]:
            cfg = tr["config"]
            cases.add(f"{cfg['level']} caching={cfg['enable_caching']}")
            bs = cfg.get("block_size", 1)
            for op, args, want, _ in tr["ops"]:
                if op == "new" and want is None:
                    cases.add("pool exhausted")
                if op == "lookup" and want is not None:
                    cases.add("prefix hit")
                if op == "arrive" and want[0]:
                    cases.add("salted hit" if args[2] else "unsalted hit")
                if op == "arrive" and want[0] and want[1] == (len(args[1]) - 1) // bs * bs and len(args[1]) % bs == 0:
                    cases.add("whole prompt cached, last block recomputed")
                if op == "arrive" and want[2] is None:
                    cases.add("not admitted")
    assert set(va.RELEASES) <= set(seen)
    for release in va.RELEASES:
        assert seen[release] >= {
            "pool caching=True",
            "pool caching=False",
            "manager caching=True",
            "manager caching=False",
            "pool exhausted",
            "prefix hit",
            "salted hit",
            "unsalted hit",
            "not admitted",
            "whole prompt cached, last block recomputed",
        }
    assert sum(p.stat().st_size for p in FILES) < 400_000  # small enough to commit (7 releases: 325 kB)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_model_replays_vllm(path: Path) -> None:
    data = _load(path)
    head = data["header"]
    assert head["wheel_sha256"] and head["command"].startswith("python scripts/record_vllm_block_traces.py")
    for tr in data["traces"]:
        if tr["config"]["level"] == "pool":
            _replay_pool(head["vllm"], tr)
        else:
            _replay_manager(head["vllm"], tr)


def test_rule_by_release() -> None:
    assert va.rule("0.9.0") is None  # older than the oldest tested
    assert va.rule("v0.29.0") == va.RULES["0.29.0"]
    assert va.rule("0.34.0") == va.RULES["0.29.0"]  # carried forward
    assert va.rule("0.25.0") == va.RULES["0.24.0"]  # between two tested releases of the same order
    assert va.rule("0.26.1") is None  # between 0.26.0 and 0.27.0, whose orders differ
    assert va.rule("0.23.1") is None
    assert va.rule("main") is None
    with pytest.raises(ValueError):
        va.BlockPool(8, True, "0.26.1")


_OPS = st.lists(
    st.tuples(st.sampled_from(["arrive", "step", "finish"]), st.integers(0, 10**6)), min_size=1, max_size=80
)


@settings(max_examples=60, deadline=None)
@given(
    ops=_OPS,
    release=st.sampled_from(va.RELEASES),
    num_blocks=st.integers(4, 24),
    caching=st.booleans(),
)
def test_model_invariants(ops: list[tuple[str, int]], release: str, num_blocks: int, caching: bool) -> None:
    """No block is both free and held; the held count of each block is its reference count; the null
    block is never handed out; a request freed alone puts its blocks back in the release's order; a
    request hits only blocks cached by a request of the same cache_salt (none or the same salt)."""
    bs = 4
    mgr = va.KVCacheManager(num_blocks, bs, caching, 20 * bs, release)
    pool = mgr.pool
    prefixes = [[1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9, 9]]
    n = 0
    salt_of: dict[int, str | None] = {}  # the salt of the request that cached each block
    hits_of: dict[str, int] = {}
    for op, x in ops:
        live = sorted(mgr.requests)
        if op == "arrive" or not live:
            n += 1
            prompt = prefixes[x % 2] + [x % 97, x % 89, x % 83][: 1 + x % 3]
            salt = "s" if x % 5 == 0 else None
            got = mgr.arrive(f"r{n}", prompt, salt)
            assert va.BlockPool.NULL not in (got[2] or [])
            assert all(salt_of[b] == salt for b in got[0])
            hits_of[f"r{n}"] = len(got[0])
        elif op == "step":
            rid = live[x % len(live)]
            if len(mgr.requests[rid].tokens) < 19 * bs and mgr.step(rid, x % 101) is None:
                mgr.finish(rid)
        else:
            rid = live[x % len(live)]
            blocks = mgr.requests[rid].blocks
            before = pool.free_order()
            shared = {b for r in mgr.requests.values() if r is not mgr.requests[rid] for b in r.blocks}
            mgr.finish(rid)
            back = [b for b in reversed(blocks) if b not in shared]
            after = pool.free_order()
            assert sorted(after) == sorted(before + back)
            if pool.rule.uncached_first if caching else pool.rule.uncached_first_off:
                uncached = [b for b in back if pool.hash[b] is None]
                cached = [b for b in back if b not in uncached]
                assert after == uncached + before + cached
            else:
                assert after == before + back  # LRU: appended at the tail, the request's tail first
        for rid, r in mgr.requests.items():
            for b in r.blocks[hits_of[rid] : r.num_cached]:
                salt_of[b] = r.salt
        held: dict[int, int] = {}
        for r in mgr.requests.values():
            for b in r.blocks:
                held[b] = held.get(b, 0) + 1
        free = pool.free_order()
        assert len(free) == len(set(free)) == pool.num_free
        assert not set(free) & set(held)
        assert va.BlockPool.NULL not in free
        assert set(free) | set(held) == set(range(1, num_blocks))  # every block but the null one
        for b in range(1, num_blocks):
            assert pool.ref[b] == held.get(b, 0)

"""Differential test of the block pool model (forensics.engines.vllm_allocator) against vLLM's own
KVCacheManager and BlockPool, live, with prefix caching on and cache salts: hypothesis draws sequences of
requests arriving (prompts that share prefixes, with no salt or one of two), arriving with their caching
delayed as a KV connector's asynchronous load does (allocate_slots(delay_cache_blocks=True)) and cached
later (cache_blocks) or never (a failed load), decode steps, finishes (a request's blocks freed, tail
first: the hits of later requests on freed blocks before they are evicted) and evict_blocks (0.23.0 on).
After every call the model must give the same hits, computed tokens, blocks and the same whole free queue.

Run it in a vLLM environment of its own (tests/data/vllm_block_traces/README.md: the recipe), with
hypothesis importable and this repository on the path; the stored traces of
tests/engines/test_vllm_allocator_port.py stay the suite's test, this is the live check behind them:

    PYTHONPATH=/path/to/hypothesis:. /work/venvs/vllm-0.29.0/bin/python scripts/vllm_prefix_differential.py \
        --examples 300
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import record_vllm_block_traces as rec  # noqa: E402  (vLLM's classes, the seed hash fixed)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from forensics.engines import vllm_allocator as va  # noqa: E402

BS = 4
PREFIXES = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9], [7] * 12, []]
SALTS = [None, "acct-a", "acct-b"]

_op = st.one_of(
    st.tuples(
        st.just("arrive"),
        st.integers(0, len(PREFIXES) - 1),
        st.lists(st.integers(1, 3), max_size=6),
        st.integers(0, len(SALTS) - 1),
        st.booleans(),
    ),
    st.tuples(st.just("step"), st.integers(0, 99), st.integers(1, 3)),
    st.tuples(st.just("cache"), st.integers(0, 99)),
    st.tuples(st.just("finish"), st.integers(0, 99)),
    st.tuples(st.just("evict"), st.lists(st.integers(1, 15), min_size=1, max_size=3)),
)


def _arrive_real(mgr: Any, req: Any, delay: bool) -> tuple[list[int], int, list[int] | None]:
    got = mgr.get_computed_blocks(req)
    blocks, computed = got[0], got[1]
    hits = list(blocks.get_block_ids()[0])
    kw = rec._kwargs(mgr.allocate_slots, delay_cache_blocks=delay)
    new = mgr.allocate_slots(req, req.num_tokens - computed, computed, blocks, **kw)
    if new is None:
        return hits, computed, None
    req.num_computed_tokens = req.num_tokens
    rec._running(req)
    return hits, computed, list(mgr.get_block_ids(req.request_id)[0])


def run(ops: list[tuple[Any, ...]], num_blocks: int, seen: dict[str, int]) -> int:
    """One sequence through both; the number of calls compared (`seen` counts the cases met)."""
    real = rec.make_manager(num_blocks, BS, True, 40 * BS)
    model = va.KVCacheManager(num_blocks, BS, True, 40 * BS, rec.RELEASE)
    live: dict[str, Any] = {}
    delayed: set[str] = set()
    n = done = 0
    for op in ops:
        rids = sorted(live)
        if op[0] == "arrive":
            n += 1
            rid, (_, p, tail, s, delay) = f"r{n}", op
            prompt, salt = PREFIXES[p] + tail, SALTS[s]
            if not prompt:
                continue
            req = rec.make_request(rid, prompt, salt, BS)
            was_free = set(model.pool.free_order())
            want = _arrive_real(real, req, delay)
            got = model.arrive(rid, prompt, salt, delay_cache=delay)
            assert list(got) == list(want), f"arrive {rid} {prompt} {salt} delay={delay}: {got} != vLLM {want}"
            if want[0]:
                seen["salted hit" if salt else "unsalted hit"] += 1
                seen["hit on a freed block"] += bool(set(want[0]) & was_free)
            seen["not admitted"] += want[2] is None
            if want[2] is not None:
                live[rid] = req
                if delay:
                    delayed.add(rid)
        elif not rids:
            continue
        elif op[0] == "step":
            rid = rids[op[1] % len(rids)]
            req = live[rid]
            if rid in delayed or req.num_tokens + op[2] >= 39 * BS:
                continue
            for k in range(op[2]):
                req.append_output_token_ids(100 + k)
                w = real.allocate_slots(req, 1)
                want_ids = None if w is None else list(real.get_block_ids(rid)[0])
                if w is not None:
                    req.num_computed_tokens += 1
                assert model.step(rid, 100 + k) == want_ids, f"step {rid}"
                done += 1
                if w is None:
                    break
        elif op[0] == "cache":
            rid = rids[op[1] % len(rids)]
            if rid not in delayed:
                continue
            seen["delayed then cached"] += 1
            real.cache_blocks(live[rid], live[rid].num_tokens)
            model.cache_blocks(rid, live[rid].num_tokens)
            delayed.discard(rid)
        elif op[0] == "finish":
            rid = rids[op[1] % len(rids)]
            real.free(live.pop(rid))
            model.finish(rid)
            delayed.discard(rid)
        elif op[0] == "evict" and model.pool.rule.has_evict:
            ids = sorted({b % num_blocks for b in op[1]} - {0})
            seen["evict"] += 1
            real.block_pool.evict_blocks(set(ids))
            model.pool.evict_blocks(ids)
        done += 1
        assert model.pool.free_order() == rec._expand_free(real.block_pool), f"after {op}: free queue differs"
    return done


def _expand_free(pool: Any) -> list[int]:
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


rec._expand_free = _expand_free  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=300)
    a = ap.parse_args()
    total = {"sequences": 0, "calls": 0}
    seen = dict.fromkeys(
        ["unsalted hit", "salted hit", "hit on a freed block", "delayed then cached", "evict", "not admitted"], 0
    )

    @settings(max_examples=a.examples, deadline=None, database=None)
    @given(ops=st.lists(_op, min_size=10, max_size=80), num_blocks=st.integers(6, 16))
    def check(ops: list[tuple[Any, ...]], num_blocks: int) -> None:
        total["calls"] += run(ops, num_blocks, seen)
        total["sequences"] += 1

    check()
    cases = ", ".join(f"{k}: {v}" for k, v in seen.items())
    print(f"vLLM {rec.RELEASE}: {total['sequences']} sequences, {total['calls']} calls, model == vLLM ({cases})")


if __name__ == "__main__":
    main()

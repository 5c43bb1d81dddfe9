"""Record vLLM's own v1 block pool (and its KV cache manager) on seeded random workloads, for the
model's differential test (tests/engines/test_vllm_allocator_port.py replays every trace through
forensics.engines.vllm_allocator and requires the same blocks and the same free queue, call for call).

Run it in a virtual environment of its own (never the project's), with CPU torch and one vLLM wheel
installed without its dependencies, plus what the imports need (the recipe and the list are in
tests/data/vllm_block_traces/README.md):

    python scripts/record_vllm_block_traces.py --wheel vllm-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl \
        --seed 50 --out tests/data/vllm_block_traces/vllm-0.29.0.json.gz

Nothing is stubbed: vllm.v1.core.block_pool, kv_cache_utils, kv_cache_manager and vllm.v1.request
import as they are on a CPU machine (vLLM logs "No platform detected" or "Triton not installed" and
goes on); the classes driven are the real BlockPool, KVCacheManager and Request, with the real block
hasher (sha256 over CBOR, PYTHONHASHSEED fixed so the first block's seed hash is too).

Two kinds of trace, each gzipped JSON {"header": ..., "traces": [{"config", "ops"}]}:
- level "pool": BlockPool called directly: ["new", n, ids | null], ["touch", ids], ["free", ids]
  (in the order given: the eviction order), ["cache", [ids, labels]] (cache_full_blocks of held
  blocks without a hash, under the block hashes named by the integer labels), ["lookup", label,
  id | null] (get_cached_block), ["evict", ids] (evict_blocks, where the release has it),
  ["reset", null, ok] (reset_prefix_cache);
- level "manager": KVCacheManager with real Requests: ["arrive", [rid, prompt, salt], [hit ids,
  computed tokens, block ids | null]] (get_computed_blocks, then allocate_slots for the rest of the
  prompt; null: not admitted, the request is dropped), ["step", [rid, token], block ids | null]
  (one output token appended, allocate_slots for one token), ["finish", rid, null] (free).
Every op ends with the free queue, head first, as runs [[first, count], ...] of consecutive
ascending block ids: [op, args, result, free_runs].
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import inspect
import json
import os
import random
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ["PYTHONHASHSEED"] = "0"  # read by init_none_hash: the seed hash of every first block

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core import kv_cache_utils as U  # noqa: E402
from vllm.v1.core.block_pool import BlockPool  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
)
from vllm.v1.request import Request  # noqa: E402

RELEASE = vllm.__version__.split("+")[0]
try:  # 0.10.2: vllm.utils; 0.29.0: vllm.utils.hashing
    from vllm.utils.hashing import get_hash_fn_by_name
except ImportError:
    from vllm.utils import get_hash_fn_by_name  # type: ignore[no-redef]

HASH_FN = get_hash_fn_by_name("sha256")
U.init_none_hash(HASH_FN)


def runs(idx: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for s in idx:
        if out and s == out[-1][0] + out[-1][1]:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return out


def free_runs(pool: BlockPool) -> list[list[int]]:
    return runs([b.block_id for b in pool.free_block_queue.get_all_free_blocks()])


def _kwargs(fn: Any, **kw: Any) -> dict[str, Any]:
    """The keyword arguments `fn` takes, of those given (the signatures differ by release)."""
    names = inspect.signature(fn).parameters
    return {k: v for k, v in kw.items() if k in names}


# --- level "pool": BlockPool called directly --------------------------------------------------


def label_hash(label: int) -> bytes:
    return U.BlockHash(label.to_bytes(32, "big"))


def pool_trace(rng: random.Random, num_blocks: int, caching: bool, n_ops: int) -> dict[str, Any]:
    pool = BlockPool(
        **_kwargs(BlockPool.__init__, num_gpu_blocks=num_blocks, enable_caching=caching, hash_block_size=16)
    )
    block = pool.blocks
    held: list[list[int]] = []  # the blocks of each live holder, in allocation order
    families = [rng.randrange(1000) * 64 for _ in range(4)]  # label chains: family + position
    ops: list[list[Any]] = []

    def rec(op: str, args: Any, result: Any = None) -> None:
        ops.append([op, args, result, free_runs(pool)])

    while len(ops) < n_ops:
        r = rng.random()
        if r < 0.45 or not held:
            fam = rng.choice(families) + (rng.randrange(3) * 16 if rng.random() < 0.3 else 0)
            length = rng.randint(1, 8)
            hits: list[int] = []
            if caching:
                for i in range(length):
                    got = pool.get_cached_block(label_hash(fam + i), [0])
                    rec("lookup", fam + i, None if got is None else got[0].block_id)
                    if got is None:
                        break
                    hits.append(got[0].block_id)
                if hits:
                    pool.touch(_touch_arg([block[i] for i in hits]))
                    rec("touch", hits)
            n = length - len(hits)
            try:
                new = [b.block_id for b in pool.get_new_blocks(n)]
            except ValueError:
                rec("new", n, None)
                if hits:
                    pool.free_blocks([block[i] for i in reversed(hits)])
                    rec("free", list(reversed(hits)))
                continue
            rec("new", n, new)
            ids = hits + new
            held.append(ids)
            full = len(ids) - (1 if rng.random() < 0.5 else 0)  # the last block may stay partial
            todo = [(i, b) for i, b in enumerate(ids[:full]) if block[b].block_hash is None]
            if caching and todo and rng.random() < 0.85:
                req = SimpleNamespace(block_hashes=[label_hash(fam + i) for i in range(full)])
                # cache_full_blocks takes a run of uncached blocks: the request's blocks past its hits
                start = todo[0][0]
                if all(block[b].block_hash is None for b in ids[start:full]):
                    pool.cache_full_blocks(
                        **_kwargs(
                            pool.cache_full_blocks,
                            request=req,
                            blocks=[block[b] for b in ids],
                            num_cached_blocks=start,
                            num_full_blocks=full,
                            block_size=16,
                            kv_cache_group_id=0,
                        )
                    )
                    rec("cache", [ids[start:full], [fam + i for i in range(start, full)]])
        elif r < 0.85:
            ids = held.pop(rng.randrange(len(held)))
            order = list(reversed(ids)) if rng.random() < 0.9 else ids  # the managers free in reverse
            pool.free_blocks([block[i] for i in order])
            rec("free", order)
        elif r < 0.93 and caching and hasattr(pool, "evict_blocks"):
            ids = sorted(rng.sample(range(1, num_blocks), rng.randint(1, 3)))
            pool.evict_blocks(set(ids))
            rec("evict", ids)
        elif r < 0.97:
            ids = rng.choice(held)
            pool.touch(_touch_arg([block[i] for i in ids]))
            held.append(list(ids))  # a second holder of the same blocks (a shared prefix)
            rec("touch", ids)
        else:
            rec("reset", None, pool.reset_prefix_cache())
    return {"config": {"level": "pool", "num_blocks": num_blocks, "enable_caching": caching}, "ops": ops}


def _touch_arg(blocks: list[Any]) -> Any:
    """touch takes a tuple of per-group lists in 0.10.2 and one list in 0.29.0."""
    ann = str(inspect.signature(BlockPool.touch).parameters["blocks"].annotation)
    return (blocks,) if ann.startswith("tuple") else blocks


# --- level "manager": KVCacheManager with real Requests ----------------------------------------


def make_manager(num_blocks: int, block_size: int, caching: bool, max_len: int) -> KVCacheManager:
    spec = FullAttentionSpec(
        **_kwargs(
            FullAttentionSpec.__init__,
            block_size=block_size,
            num_kv_heads=1,
            head_size=8,
            dtype=torch.float16,
            use_mla=False,
        )
    )
    cfg = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[KVCacheTensor(**_tensor_kwargs(num_blocks, spec.page_size_bytes))],
        kv_cache_groups=[KVCacheGroupSpec(layer_names=["l0"], kv_cache_spec=spec)],
    )
    return KVCacheManager(
        **_kwargs(
            KVCacheManager.__init__,
            kv_cache_config=cfg,
            max_model_len=max_len,
            scheduler_block_size=block_size,
            hash_block_size=block_size,
            enable_caching=caching,
        )
    )


def _tensor_kwargs(num_blocks: int, page: int) -> dict[str, Any]:
    """KVCacheTensor's fields: shared_by in 0.10.2; layers and strides in 0.29.0 (never read here: the
    manager allocates block ids, no memory)."""
    return _kwargs(
        KVCacheTensor.__init__,
        size=num_blocks * page,
        shared_by=["l0"],
        layers=["l0"],
        layer_stride=page * num_blocks,
        block_stride=page,
    )


def make_request(rid: str, prompt: list[int], salt: str | None, block_size: int) -> Request:
    return Request(
        **_kwargs(
            Request.__init__,
            request_id=rid,
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=10_000),
            pooling_params=None,
            eos_token_id=None,
            cache_salt=salt,
            block_hasher=U.get_request_block_hasher(block_size, HASH_FN),
        )
    )


def manager_trace(rng: random.Random, num_blocks: int, block_size: int, caching: bool, n_ops: int) -> dict[str, Any]:
    max_len = 40 * block_size
    mgr = make_manager(num_blocks, block_size, caching, max_len)
    pool = mgr.block_pool
    prefixes = [[rng.randrange(50_000) for _ in range(rng.randint(1, 4) * block_size)] for _ in range(4)]
    salts = [None, None, "acct-a", "acct-b"]
    live: dict[str, Request] = {}
    sent: list[tuple[list[int], str | None]] = []
    ops: list[list[Any]] = []
    n = 0
    while len(ops) < n_ops:
        r = rng.random()
        if r < 0.3 or not live:
            n += 1
            rid = f"r{n}"
            if sent and rng.random() < 0.2:  # a prompt sent again, whole (its last block always recomputed)
                prompt, salt = rng.choice(sent)
                if rng.random() < 0.5 and len(prompt) > block_size:
                    prompt = prompt[: len(prompt) // block_size * block_size]
            else:
                prompt = list(rng.choice(prefixes)) if rng.random() < 0.7 else []
                prompt += [rng.randrange(50_000) for _ in range(rng.randint(1, 3 * block_size))]
                salt = rng.choice(salts)
            sent.append((prompt, salt))
            req = make_request(rid, prompt, salt, block_size)
            got = mgr.get_computed_blocks(req)
            blocks, computed = got[0], got[1]
            hit = list(blocks.get_block_ids()[0])
            new = mgr.allocate_slots(req, len(prompt) - computed, computed, blocks)
            if new is None:
                ids = None
            else:
                ids = list(mgr.get_block_ids(rid)[0])
                req.num_computed_tokens = len(prompt)
                _running(req)
                live[rid] = req
            ops.append(["arrive", [rid, prompt, salt], [hit, computed, ids], free_runs(pool)])
        elif r < 0.85:
            rid = rng.choice(sorted(live))
            req = live[rid]
            if req.num_tokens >= max_len:
                continue
            tok = rng.randrange(50_000)
            req.append_output_token_ids(tok)
            new = mgr.allocate_slots(req, 1)
            if new is None:  # the scheduler would preempt: the test frees it as vLLM does
                ids = None
            else:
                req.num_computed_tokens += 1
                ids = list(mgr.get_block_ids(rid)[0])
            ops.append(["step", [rid, tok], ids, free_runs(pool)])
            if new is None:
                mgr.free(req)
                del live[rid]
                ops.append(["finish", rid, None, free_runs(pool)])
        else:
            rid = rng.choice(sorted(live))
            mgr.free(live.pop(rid))
            ops.append(["finish", rid, None, free_runs(pool)])
    config = {
        "level": "manager",
        "num_blocks": num_blocks,
        "block_size": block_size,
        "enable_caching": caching,
        "max_model_len": max_len,
    }
    return {"config": config, "ops": ops}


def _running(req: Request) -> None:
    """The scheduler marks an admitted request RUNNING (0.29.0's allocate_slots reads the status)."""
    from vllm.v1.request import RequestStatus

    req.status = RequestStatus.RUNNING


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", required=True, help="the vLLM wheel installed (hashed into the header)")
    ap.add_argument("--seed", type=int, default=50)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    traces = []
    for num_blocks in (12, 40):
        for caching in (True, False):
            traces.append(pool_trace(rng, num_blocks, caching, 400))
    for block_size in (4, 16):
        for num_blocks in (10, 48):
            traces.append(manager_trace(rng, num_blocks, block_size, True, 300))
        traces.append(manager_trace(rng, 24, block_size, False, 150))
    wheel = Path(a.wheel)
    repo = Path(__file__).resolve().parents[1]
    out = a.out.resolve()
    shown = out.relative_to(repo) if out.is_relative_to(repo) else out  # the header says where it lies
    header = {
        "vllm": RELEASE,
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "seed": a.seed,
        "command": "python scripts/record_vllm_block_traces.py "
        + shlex.join(["--wheel", wheel.name, "--seed", str(a.seed), "--out", str(shown)]),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(a.out, "wb", mtime=0) as f:
        f.write(json.dumps({"header": header, "traces": traces}, separators=(",", ":")).encode())
    print(a.out, sum(len(t["ops"]) for t in traces), "ops")


if __name__ == "__main__":
    main()

"""Record SGLang's own KV slot allocators on seeded random call sequences, for the port's differential
test (tests/engines/test_allocator_port.py replays every trace through
forensics.engines.sglang_allocator and requires the same slots).

Run it in a virtual environment of its own (never the project's), with CPU torch, triton (its
interpreter runs SGLang's Triton kernels on the CPU) and one SGLang wheel installed without its
dependencies, plus what `import sglang.srt.mem_cache.allocator` needs (tqdm, requests, pydantic,
aiohttp, pyzmq, fastapi, pillow, orjson, psutil, pybase64, IPython, packaging, transformers,
msgspec: whatever the import stops on):

    python -m venv /tmp/sgl-0.5.4 && /tmp/sgl-0.5.4/bin/pip install torch==2.13.0 triton==3.9.0
    /tmp/sgl-0.5.4/bin/pip install --no-deps sglang==0.5.4   # then the import's own needs
    /tmp/sgl-0.5.4/bin/python scripts/record_allocator_traces.py --wheel sglang-0.5.4-py3-none-any.whl

(0.4.9 needs triton==3.3.1: its sglang.srt.utils imports triton.runtime.cache.default_cache_dir.)

What the script stubs, so that the allocator module imports on a machine without a GPU, and why:
- torchvision (imported by sglang's configs and utils for image models; PyPI's torchvision does
  not load beside the CPU torch build): an empty module tree;
- sglang.srt.mem_cache.memory_pool (0.4.9 only: the allocator imports it for the SWAKVPool type of
  the SWA allocator, and it imports the attention and quantization layers, which need CUDA kernel
  packages): a module with empty SWAKVPool and KVCache classes;
- torch._C._cpu._is_amx_tile_supported (0.4.9's utils calls it at import; newer torch renamed it):
  returns False.
Neither touches the allocators. The Triton kernels (alloc_extend_kernel, alloc_decode_kernel) run
under TRITON_INTERPRET=1: the kernels GPU nodes run, interpreted. 0.5.23 picks its torch-native
twins (alloc_extend_naive, alloc_decode_naive) when the platform has no Triton; --kernels native
records that path, --kernels triton (the default) forces the Triton one.

Each trace is gzipped JSON: {"header": wheel, sha256, versions, command; "config": size, page size,
need_sort; "ops": [[op, args, result, available_size], ...]}, index lists written as runs
[[first, count], ...] of consecutive ascending indices.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import shlex
import sys
import types
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")


# the CPU stubs are the plugin's (forensics.sglang.cpu): the script runs from the repository, in a venv
# without the project installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from forensics.sglang.cpu import install_stubs  # noqa: E402

STUBS = ("torchvision",)
torch = install_stubs(STUBS)
_AMX_SHIM = torch._C._cpu._is_amx_tile_supported.__name__ == "<lambda>"  # install_stubs' shim

import sglang  # noqa: E402

if sglang.__version__.startswith("0.4."):  # the memory pool drags in every model layer (see the docstring)
    _mp = types.ModuleType("sglang.srt.mem_cache.memory_pool")
    _mp.SWAKVPool = type("SWAKVPool", (), {})
    _mp.KVCache = type("KVCache", (), {})
    sys.modules[_mp.__name__] = _mp
from sglang.srt.mem_cache import allocator as A  # noqa: E402

RELEASE = sglang.__version__
V0_4 = RELEASE.startswith("0.4.")
I64 = torch.int64


def runs(idx: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for s in idx:
        if out and s == out[-1][0] + out[-1][1]:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return out


def t(x: list[int]) -> torch.Tensor:
    return torch.tensor(x, dtype=I64)


def make(size: int, ps: int, need_sort: bool, kernels: str):  # noqa: ANN201
    if ps == 1:
        a = (
            A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None)
            if V0_4
            else (A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None, need_sort))
        )
    else:
        a = (
            A.PagedTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None)
            if V0_4
            else (A.PagedTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None, need_sort))
        )
    if hasattr(a, "use_triton_kernels"):
        a.use_triton_kernels = kernels == "triton"
    return a


def lst(x: torch.Tensor | None) -> list[int] | None:
    return None if x is None else [int(v) for v in x.tolist()]


def record(size: int, ps: int, need_sort: bool, seed: int, n_ops: int, kernels: str) -> dict:
    rng = random.Random(seed * 1000003 + ps * 7 + need_sort)
    a = make(size, ps, need_sort, kernels)
    rows: dict[int, list[int]] = {}  # live requests: their kv rows
    nxt = 0
    ops: list[list] = []
    states: list[tuple[object, dict[int, list[int]], int]] = []
    has_backup = hasattr(a, "backup_state")
    has_page_ids = hasattr(a, "free_page_ids")
    cap = a.size // ps * ps

    def avail_pages() -> int:
        return a.available_size() // ps

    def emit(op: str, args: object, res: list[int] | None | int) -> None:
        r = runs(res) if isinstance(res, list) else res
        ops.append([op, args, r, int(a.available_size())])

    def pick(k: int) -> list[int]:
        ids = sorted(rows)
        rng.shuffle(ids)
        return ids[:k]

    def free_args(rid: int) -> list[int]:
        """The row, or its tail from a page boundary (the request keeps its head), in row order or
        shuffled."""
        row = rows[rid]
        n_pages = (len(row) + ps - 1) // ps
        cut = 0 if n_pages <= 1 or rng.random() < 0.7 else rng.randrange(1, n_pages) * ps
        part = row[cut:]
        if cut:
            rows[rid] = row[:cut]
        else:
            del rows[rid]
        if rng.random() < 0.2:
            part = part[:]
            rng.shuffle(part)
        return part

    for _ in range(n_ops):
        x = rng.random()
        if x < 0.25 or not rows:  # alloc (page-aligned); sometimes more than the pool holds
            n = rng.randrange(1, max(2, cap // (3 * ps))) * ps
            if rng.random() < 0.1:
                n = avail_pages() * ps + ps
            out = lst(a.alloc(n))
            emit("alloc", n, out)
            if out:
                rows[nxt] = out
                nxt += 1
        elif ps > 1 and x < 0.45:  # alloc_extend: new requests and existing ones grow
            batch = []
            for rid in pick(rng.randrange(0, 3)):
                batch.append(rid)
            for _ in range(rng.randrange(0 if batch else 1, 3)):
                batch.append(-1)
            pre = [len(rows[r]) if r >= 0 else 0 for r in batch]
            seq = [p + rng.randrange(1, max(2, 3 * ps)) for p in pre]
            last = [rows[r][-1] if r >= 0 and rows[r] else -1 for r in batch]
            need = sum((s + ps - 1) // ps - (p + ps - 1) // ps for p, s in zip(pre, seq, strict=True))
            if need > avail_pages() and not RELEASE.startswith("0.5.23"):
                continue  # the Triton kernel reads past free_pages before it checks (0.4.9-0.5.11)
            ext = sum(s - p for p, s in zip(pre, seq, strict=True))
            if V0_4:
                out = lst(a.alloc_extend(t(pre), t(seq), t(last), ext))
            else:
                out = lst(a.alloc_extend(t(pre), t(pre), t(seq), t(seq), t(last), ext))
            emit("alloc_extend", [pre, seq, last, ext], out)
            if out is not None:
                k = 0
                for r, p, s in zip(batch, pre, seq, strict=True):
                    if r < 0:
                        r = nxt
                        nxt += 1
                        rows[r] = []
                    rows[r].extend(out[k : k + s - p])
                    k += s - p
        elif ps > 1 and x < 0.6:  # alloc_decode: one token for each of a batch
            batch = [r for r in pick(rng.randrange(1, 5)) if rows[r]]
            if not batch:
                continue
            seq = [len(rows[r]) + 1 for r in batch]
            last = [rows[r][-1] for r in batch]
            need = sum(1 for s in seq if (s - 1) % ps == 0)
            if need > avail_pages() and not RELEASE.startswith("0.5.23"):
                continue
            out = lst(a.alloc_decode(t(seq), t(last)) if V0_4 else a.alloc_decode(t(seq), t(seq), t(last)))
            emit("alloc_decode", [seq, last], out)
            if out is not None:
                for r, s in zip(batch, out, strict=True):
                    rows[r].append(s)
        elif x < 0.82:  # free
            part = free_args(pick(1)[0])
            a.free(t(part))
            emit("free", runs(part), None)
        elif x < 0.9:  # a free group of a few requests
            parts = [free_args(r) for r in pick(rng.randrange(1, 4))]
            use_ids = has_page_ids and ps > 1 and rng.random() < 0.5
            a.free_group_begin()
            args = []
            for part in parts:
                if use_ids and rng.random() < 0.5 and len(part) % ps == 0 and part == sorted(part):
                    ids = part[::ps]
                    ids = [s // ps for s in ids]
                    a.free_page_ids(t(ids))
                    args.append(["free_page_ids", runs(ids)])
                else:
                    a.free(t(part))
                    args.append(["free", runs(part)])
            a.free_group_end()
            emit("free_group", args, None)
        elif x < 0.94 and has_page_ids and ps > 1:  # free_page_ids of a whole request
            rid = pick(1)[0]
            row = rows.pop(rid)
            if any(row[i] % ps for i in range(0, len(row), ps)):
                rows[rid] = row
                continue
            ids = [s // ps for s in row[::ps]]
            a.free_page_ids(t(ids))
            emit("free_page_ids", runs(ids), None)
        elif x < 0.97 and has_backup:  # backup, a few allocations, restore (as retraction uses it)
            if not states:
                states.append((a.backup_state(), {k: v[:] for k, v in rows.items()}, nxt))
                emit("backup_state", None, None)
            else:
                st, saved, n0 = states.pop()
                a.restore_state(st)
                rows = saved
                nxt = n0
                emit("restore_state", None, None)
        elif x > 0.995:
            a.clear()
            rows = {}
            states = []
            emit("clear", None, None)
        elif rows:
            part = free_args(pick(1)[0])
            a.free(t(part))
            emit("free", runs(part), None)
    return {"config": {"size": size, "page_size": ps, "need_sort": need_sort, "kernels": kernels}, "ops": ops}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", required=True, help="the SGLang wheel installed in this venv (hashed into the header)")
    ap.add_argument("--out", default="tests/data/allocator_traces")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--ops", type=int, default=160)
    ap.add_argument("--kernels", choices=("triton", "native"), default="triton")
    args = ap.parse_args()
    wheel = Path(args.wheel)
    header = {
        "sglang": RELEASE,
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "kernels": args.kernels,
        "stubs": list(STUBS)
        + (["sglang.srt.mem_cache.memory_pool"] if V0_4 else [])
        + [m for m in ["torch._C._cpu._is_amx_tile_supported"] if _AMX_SHIM],
        "python": sys.version.split()[0],
        "command": "python scripts/record_allocator_traces.py " + shlex.join(sys.argv[1:]),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = {1: 160, 16: 40 * 16, 64: 20 * 64}
    modes = (False,) if V0_4 else (False, True)
    traces = [
        record(sizes[ps], ps, ns, seed, args.ops, args.kernels)
        for ps in (1, 16, 64)
        for ns in modes
        for seed in range(args.seeds)
    ]
    name = f"sglang-{RELEASE}" + ("" if args.kernels == "triton" else f"-{args.kernels}") + ".json.gz"
    body = json.dumps({"header": header, "traces": traces}, separators=(",", ":"), sort_keys=True)
    with gzip.GzipFile(out / name, "wb", mtime=0) as f:
        f.write(body.encode())
    print(out / name, len(traces), "traces", sum(len(x["ops"]) for x in traces), "ops")


if __name__ == "__main__":
    main()

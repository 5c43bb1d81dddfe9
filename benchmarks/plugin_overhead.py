"""What the SGLang plugin (forensics.sglang, issues #38, #48) costs the scheduler, on CPU.

SGLang's own allocator (page size 1: TokenToKVPoolAllocator; larger: PagedTokenToKVPoolAllocator with
its torch-native alloc_extend / alloc_decode, 0.5.23 on CPU) and a req_to_token pool of rows hold
`--inflight` requests with prompts of `--prompt/2 .. --prompt` tokens (seeded, so pages end part way).
`--steps` decode steps run over all of them: each step allocates the next slot of every request
(alloc / alloc_decode: a new page only where a request's last one is full), writes the slots into the
rows and calls the plugin's run_batch hook. After each step `--churn` of the requests finish and are
replaced: a finished request's slots are freed as SGLang frees them (free at page size 1;
free_segment's free_page_ids above) and its row released; a new request takes a row and its prompt's
slots (alloc / alloc_extend) from a free list the frees have fragmented. Each path runs bare (the
hooks' original functions only) and with the plugin's hooks in three configurations: the recorder
alone (guard off), the guard alone (observe, no recorder) and both. Reported: the extra ns per
allocated page on the admit-and-release path (alloc, row write, free), the extra µs per decode step
(median) and that as a share of a decode step's scheduler time (`--step-ms`, default 25 ms: the step
the simulator models for the incident's deployment, SimConfig.decode_step_ms; the CPU time a GPU
server's scheduler spends per step is not measurable on this host, so the share is against that
stated figure). The recorder's writer thread runs as in a server (its writes happen on that thread,
and count here only through the GIL).

Run it in the plugin tests' venv (make test-sglang builds it):

    PYTHONPATH=$PWD .venv-sglang/bin/python benchmarks/plugin_overhead.py --inflight 256 --prompt 1024 \
        --page-sizes 1,16,64
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.sglang import guard, hooks  # noqa: E402
from forensics.sglang.cpu import import_sglang, standin_rows  # noqa: E402
from forensics.sglang.recorder import Recorder  # noqa: E402
from forensics.sglang.runtime import Runtime  # noqa: E402


class _Decode:
    def is_decode(self) -> bool:
        return True


def one(sg, cfg: str, a: argparse.Namespace, ps: int, tmp: Path) -> dict[str, float]:  # noqa: ANN001
    torch = sg.torch
    n, prompt, steps = a.inflight, a.prompt, a.steps
    rng = random.Random(a.seed)
    churn = max(1, round(n * a.churn)) if a.churn > 0 else 0
    live = n + churn * steps  # every request the run admits, each with its steps' slots
    size = (live * (prompt + steps + ps) // ps + 64) * ps
    if ps == 1:
        alloc = sg.A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None, False)
    else:
        alloc = sg.A.PagedTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None, False)
        alloc.use_triton_kernels = False  # the torch-native twins, as on a CPU platform
    rows = standin_rows(torch)(n + churn + 1, prompt + steps + 1, "cpu", False)
    rt = None
    if cfg != "bare":
        rec = Recorder(tmp / cfg, "decode-0", a.format, 1 << 22, 1 << 30, 50) if cfg in ("recorder", "both") else None
        # the ledger sized to the pool, as the plugin sizes it on the allocator's first call (hooks._ensure)
        rt = Runtime("decode-0", ps, rec, "observe" if cfg in ("guard", "both") else "off", tmp / f"{cfg}.alerts",
                     slots=size + 2 * ps + 1)  # fmt: skip
    hooks.install(rt)
    cls = type(alloc)

    def call(hook, name: str, *args):  # noqa: ANN001, ANN202 (the hooked call as the registry makes it)
        return getattr(cls, name)(alloc, *args) if rt is None else hook(getattr(cls, name), alloc, *args)

    room = iter(range(1000, 1 << 40))
    seqs: dict[int, int] = {}

    def admit(k: int) -> SimpleNamespace:
        r = SimpleNamespace(rid=f"r{k}", bootstrap_room=next(room), req_pool_idx=None, prefix_len=0, to_finish=None)
        length = rng.randint(prompt // 2, prompt)
        rows.alloc([r])
        if ps == 1:
            slots = call(hooks.h_alloc, "alloc", length)
        else:
            z, L = torch.zeros(1, dtype=torch.int64), torch.tensor([length])
            slots = call(hooks.h_alloc, "alloc_extend", z, z, L, L, torch.tensor([-1]), length)
        rows.write((r.req_pool_idx, slice(0, length)), slots.to(torch.int32))
        if rt is not None:  # a decode node's prompt KV arrives by transfer: its landing, as the ledger takes it
            rt.on_landed(r.bootstrap_room, slots.numpy())
        seqs[r.bootstrap_room] = length
        return r

    def release(r: SimpleNamespace) -> None:
        slots = rows.req_to_token[r.req_pool_idx, : seqs.pop(r.bootstrap_room)].to(torch.int64)
        if ps == 1:
            call(hooks.h_free, "free", slots)
        else:  # free_segment: the pages by id (mem_cache/allocator/paged.py, 0.5.23)
            call(hooks.h_free_pages, "free_page_ids", slots[::ps] // ps)
        rows.free(r)

    reqs = [admit(i) for i in range(n)]
    sched = SimpleNamespace(req_to_token_pool=rows)
    step_ns, churn_ns, churn_pages = [], 0, 0
    for s in range(steps):
        seq = torch.tensor([seqs[r.bootstrap_room] for r in reqs], dtype=torch.int64)
        idx = torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64)
        t0 = time.perf_counter_ns()
        if ps == 1:
            out = call(hooks.h_alloc, "alloc", n)
        else:
            last = rows.req_to_token[idx, seq - 1].to(torch.int64)
            out = call(hooks.h_alloc, "alloc_decode", seq + 1, seq + 1, last)
        rows.write((idx, seq), out.to(torch.int32))
        batch = SimpleNamespace(reqs=reqs, forward_mode=_Decode(), seq_lens=seq + 1, out_cache_loc=out)
        for r in reqs:
            r.prefix_len = seqs[r.bootstrap_room]
        if rt is not None:
            guard.h_run_batch(lambda _s, _b: None, sched, batch)
        step_ns.append(time.perf_counter_ns() - t0)
        for r in reqs:
            seqs[r.bootstrap_room] += 1
        # churn: finished requests release their slots, new ones take theirs from the fragmented free list
        t0 = time.perf_counter_ns()
        for k in rng.sample(range(n), churn):
            old = reqs[k]
            churn_pages += -(-seqs[old.bootstrap_room] // ps)
            release(old)
            reqs[k] = admit(s * n + k)
        churn_ns += time.perf_counter_ns() - t0
    if rt is not None and rt.rec is not None:
        rt.rec.close()
        assert rt.rec.dropped == 0
    hooks.install(None)
    assert rt is None or rt.stats.violations == 0
    return {"churn_ns": churn_ns, "pages": churn_pages, "step_ns": statistics.median(step_ns)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inflight", type=int, default=256, help="requests in flight on the decode node")
    ap.add_argument("--prompt", type=int, default=1024, help="the longest prompt, in tokens (the shortest: half)")
    ap.add_argument("--steps", type=int, default=48, help="decode steps (the median step is reported)")
    ap.add_argument("--churn", type=float, default=1 / 32, help="share of the requests replaced after each step")
    ap.add_argument("--page-sizes", default="1,16,64", help="page sizes to run (above 1: the paged allocator)")
    ap.add_argument("--step-ms", type=float, default=25.0, help="a decode step's scheduler time to compare with")
    ap.add_argument("--format", default="parquet", choices=("parquet", "jsonl"), help="the page files' format")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (the fastest is kept)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)
    sg = import_sglang()
    sizes = [int(x) for x in a.page_sizes.split(",")]
    print(f"sglang {sg.sglang.__version__}, torch {sg.torch.__version__}, {a.inflight} requests in flight, "
          f"prompts of {a.prompt // 2}-{a.prompt} tokens, {a.steps} decode steps, {a.churn:.3g} of the requests "
          f"replaced per step, {a.format} files, best of {a.repeat}")  # fmt: skip
    print()
    print(f"| page size | plugin | ns per allocated page (alloc, row write, free) | µs per decode step "
          f"({a.inflight} requests) | share of a {a.step_ms:g} ms decode step |")  # fmt: skip
    print("|---:|---|---:|---:|---:|")
    for ps in sizes:
        if ps > 1 and "use_triton_kernels" not in sg.A.PagedTokenToKVPoolAllocator.__init__.__code__.co_names:
            print(f"| {ps} | (SGLang {sg.sglang.__version__}'s paged allocator runs its Triton kernel only) | | | |")
            continue
        tmp = Path(tempfile.mkdtemp(prefix="kvf-overhead-"))
        try:
            res: dict[str, dict[str, float]] = {}
            for cfg in ("bare", "recorder", "guard", "both"):
                runs = [one(sg, cfg, a, ps, tmp) for _ in range(a.repeat)]
                res[cfg] = {"churn_ns": min(r["churn_ns"] for r in runs), "pages": runs[0]["pages"],
                            "step_ns": min(r["step_ns"] for r in runs)}  # fmt: skip
                shutil.rmtree(tmp / cfg, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        bare = res["bare"]
        print(f"| {ps} | bare | {bare['churn_ns'] / bare['pages']:,.0f} | {bare['step_ns'] / 1e3:,.1f} | |")
        for cfg in ("recorder", "guard", "both"):
            r = res[cfg]
            page = (r["churn_ns"] - bare["churn_ns"]) / r["pages"]
            step = r["step_ns"] - bare["step_ns"]
            print(f"| {ps} | +{cfg} | {page:+,.0f} | {step / 1e3:+,.1f} | {100 * step / (a.step_ms * 1e6):.2f}% |")


if __name__ == "__main__":
    main()

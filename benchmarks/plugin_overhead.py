"""What the SGLang plugin (forensics.sglang, issue #38) costs the scheduler, on CPU.

SGLang's own TokenToKVPoolAllocator (page size 1: its alloc and free are pure torch) and a
req_to_token pool of `--inflight` rows hold `--inflight` requests of `--prompt` tokens each. Every
request is allocated and its row written (the prefill/pre-allocation path), then `--steps` decode
steps run over all of them: each step allocates one slot per request (out_cache_loc), writes it into
the rows and calls the plugin's run_batch hook, which reads every request's row up to its length.
Each path runs bare (the hooks' original functions only) and with the plugin's hooks in three
configurations: the recorder alone (guard off), the guard alone (observe, no recorder) and both. The
extra time is reported as ns per allocated page (prefill path) and ns per decode batch, and the
batch cost as a share of a decode step's scheduler time (`--step-ms`, default 25 ms: the decode step
the simulator models for the incident's deployment, SimConfig.decode_step_ms; the CPU time the
scheduler spends per step on a GPU server is not measurable on this host, so the share is against
that stated figure). The recorder's writer thread runs as in a server (its JSONL writes happen on
that thread, and count here only through the GIL).

Run it in the plugin tests' venv (make test-sglang builds it):

    PYTHONPATH=$PWD .venv-sglang/bin/python benchmarks/plugin_overhead.py --inflight 256 --prompt 8192
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.sglang import hooks  # noqa: E402
from forensics.sglang.cpu import import_sglang, standin_rows  # noqa: E402
from forensics.sglang.recorder import Recorder  # noqa: E402
from forensics.sglang.runtime import Runtime  # noqa: E402


class _Decode:
    def is_decode(self) -> bool:
        return True


def one(sg, cfg: str, n: int, prompt: int, steps: int, tmp: Path, fmt: str = "parquet") -> dict[str, float]:  # noqa: ANN001, E501
    torch = sg.torch
    size = n * (prompt + steps) + 1024
    alloc = sg.A.TokenToKVPoolAllocator(size, torch.float16, "cpu", None, False)
    rows = standin_rows(torch)(n + 1, prompt + steps + 1, "cpu", False)
    rt = None
    if cfg != "bare":
        rec = Recorder(tmp / cfg, "decode-0", fmt, 1 << 22, 1 << 30, 50) if cfg in ("recorder", "both") else None
        # the ledger sized to the pool, as the plugin sizes it on the allocator's first call (hooks._ensure)
        rt = Runtime("decode-0", 1, rec, "observe" if cfg in ("guard", "both") else "off", tmp / f"{cfg}.alerts",
                     slots=size + 3)  # fmt: skip
    hooks.install(rt)
    raw_alloc = type(alloc).alloc
    do_alloc = (lambda k: raw_alloc(alloc, k)) if rt is None else (lambda k: hooks.h_alloc(raw_alloc, alloc, k))
    reqs = [SimpleNamespace(rid=f"r{i}", bootstrap_room=1000 + i, req_pool_idx=None, prefix_len=0, to_finish=None)
            for i in range(n)]  # fmt: skip
    # the prefill / pre-allocation path: a request's slots allocated and written into its row
    t0 = time.perf_counter_ns()
    for r in reqs:
        rows.alloc([r])
        slots = do_alloc(prompt)
        rows.write((r.req_pool_idx, slice(0, prompt)), slots.to(torch.int32))
    t_alloc = time.perf_counter_ns() - t0
    sched = SimpleNamespace(req_to_token_pool=rows)
    idx = torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64)
    step_ns = []
    for s in range(steps):
        seq = prompt + s + 1
        t0 = time.perf_counter_ns()
        out = do_alloc(n)
        rows.write((idx, torch.full((n,), seq - 1, dtype=torch.int64)), out.to(torch.int32))
        batch = SimpleNamespace(reqs=reqs, forward_mode=_Decode(), seq_lens=torch.full((n,), seq), out_cache_loc=out)
        for r in reqs:
            r.prefix_len = seq - 1
        if rt is None:
            pass  # the bare step: the allocator and the row write are SGLang's own work
        else:
            hooks.h_run_batch(lambda _s, _b: None, sched, batch)
        step_ns.append(time.perf_counter_ns() - t0)
    if rt is not None and rt.rec is not None:
        rt.rec.close()
    hooks.install(None)
    assert rt is None or rt.stats.violations == 0
    return {"alloc_ns": t_alloc, "pages": n * prompt, "step_ns": statistics.median(step_ns)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inflight", type=int, default=256, help="requests in flight on the decode node")
    ap.add_argument("--prompt", type=int, default=8192, help="tokens per request's prompt")
    ap.add_argument("--steps", type=int, default=20, help="decode steps (the median step is reported)")
    ap.add_argument("--step-ms", type=float, default=25.0, help="a decode step's scheduler time to compare with")
    ap.add_argument("--format", default="parquet", choices=("parquet", "jsonl"), help="the page files' format")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (the fastest is kept)")
    a = ap.parse_args()
    logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)
    sg = import_sglang()
    tmp = Path(tempfile.mkdtemp(prefix="kvf-overhead-"))
    try:
        res: dict[str, dict[str, float]] = {}
        for cfg in ("bare", "recorder", "guard", "both"):
            runs = [one(sg, cfg, a.inflight, a.prompt, a.steps, tmp, a.format) for _ in range(a.repeat)]
            res[cfg] = {"alloc_ns": min(r["alloc_ns"] for r in runs), "pages": runs[0]["pages"],
                        "step_ns": min(r["step_ns"] for r in runs)}  # fmt: skip
            shutil.rmtree(tmp / cfg, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bare = res["bare"]
    print(f"sglang {sg.sglang.__version__}, torch {sg.torch.__version__}, {a.inflight} requests in flight, "
          f"prompts of {a.prompt} tokens (page size 1), {a.steps} decode steps, {a.format} files, "
          f"best of {a.repeat}")  # fmt: skip
    print(f"bare: {bare['alloc_ns'] / bare['pages']:.1f} ns per allocated page (alloc + row write), "
          f"{bare['step_ns'] / 1e6:.3f} ms per decode step (alloc + row write)")  # fmt: skip
    print()
    print(f"| plugin | ns per allocated page | ns per decode batch ({a.inflight} requests) | share of a "
          f"{a.step_ms:g} ms decode step |")  # fmt: skip
    print("|---|---:|---:|---:|")
    for cfg in ("recorder", "guard", "both"):
        r = res[cfg]
        page = (r["alloc_ns"] - bare["alloc_ns"]) / r["pages"]
        step = r["step_ns"] - bare["step_ns"]
        print(f"| {cfg} | {page:,.1f} | {step:,.0f} | {100 * step / (a.step_ms * 1e6):.2f}% |")


if __name__ == "__main__":
    main()

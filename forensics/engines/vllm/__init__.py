"""vLLM (V0 and V1): its start-up lines here; its per-request lines in shapes.py (the table), fields.py
(their rows) and reader.py (the line reader); docs/vllm-lines.md says what each release logs.

Start-up lines: KV cache capacity, max model length, and the two start-up errors
that say one max-length request cannot fit.

Pool: V1 `GPU KV cache size: N tokens`; else a block count times the block size, a derived pool.
The block count is `# GPU blocks: N, # CPU blocks: M` (V0 vllm/executor/gpu_executor.py), `# cuda
blocks: N` / `# CUDA blocks: N` (V0 vllm/executor/executor_base.py, the platform's device name or
dispatch key) or a bare `# GPU blocks: N` (early V1, vllm/v1/core/kv_cache_utils.py and
vllm/v1/executor/). vLLM prints no block size next to it: it comes from `block_size=B` in the
`args: Namespace(..)` dump or `'block_size': B` in `non-default args: {..}`; when neither is there
the pool is assumed with vLLM's default 16, which the platform may have changed, so it proves
nothing (forensics.audit.verdict). `Maximum concurrency for C tokens per request: X.XXx` carries
the context length C, and below 1.00x proves one full-length request cannot fit (vLLM computes it
with the real block size, and it is more reliable than the token count for hybrid and
sliding-window models, so the verdict prefers it).
"""

from __future__ import annotations

import re

from forensics.engines.facts import Derivation, Engine, Evidence, Facts, LogLine, Pool, loose, to_int

NAME = "vllm"
STARTUP = re.compile(r"vLLM API server version")
MARKERS = (
    "KV cache size:",
    " blocks: ",
    "Maximum concurrency for",
    "max seq len",
    "vLLM API server version",
    "LLM engine (v",
    "Using max model len",
    "vllm.",
    "EngineCore",
)
KEYWORDS = (
    "tokens",
    "block",
    "seq len",
    "max_seq_len",
    "model",
    "kv_role",
    "server version",
    "EngineCore",
    "LLM engine",
)
DEFAULT_BLOCK_SIZE = 16

_BLOCKS = re.compile(r"# (\w+) blocks: (\d[\d,]*)")
_BLOCK_SIZE = re.compile(r"(?<![\w.])['\"]?block_size['\"]?\s*[=:]\s*(\d+)")
_KV_TOKENS = re.compile(r"(\w+) KV cache size: (\d[\d,]*) tokens")
_CONC = re.compile(r"Maximum concurrency for (\d[\d,]*) tokens per request(?::| changes from [\d.]+x to) ([\d.]+)x")
_MAXLEN = re.compile(
    r"Using max model len (\d+)|(?<![\w.])['\"]?max_model_len['\"]?\s*[=:]\s*(\d+)"
    r"|(?<![\w.])max_seq_len=(\d+)"
)


_TOO_BIG = loose(
    r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache "
    r"\((\d+)\)"
)
_NEEDED = loose(
    r"max seq len \((\d+)\),? \(?([\d.]+) GiB KV cache is needed, which is larger than the available "
    r"KV cache memory \(([\d.]+) GiB\)"
    r"(?:\. Based on the available memory, the estimated maximum model length is (\d+))?"
)
_MODEL = re.compile(r"(?:with config: model=|'model': )'([^']*)'")
_ROLE = re.compile(r"kv_role['\"]?\s*[=:]\s*['\"]kv_(producer|consumer|both)")
_ROLES = {"producer": "prefill", "consumer": "decode", "both": "unified"}


def parse(lines: list[LogLine]) -> Facts:
    facts = Facts(NAME)
    block_size: int | None = None
    size_ev: Evidence | None = None
    blocks: list[tuple[str, int, Evidence]] = []
    for ln in lines:
        t = ln.text
        if " blocks: " in t and (m := _BLOCKS.search(t)) and m[1] != "CPU":
            blocks.append((ln.rank, to_int(m[2]), Evidence.of(ln)))
        if "KV cache size:" in t and (m := _KV_TOKENS.search(t)) and m[1] != "CPU":
            facts.add_pool(ln.rank, Pool(f"{m[1]} KV cache size", to_int(m[2]), Evidence.of(ln), 2))
        if "Maximum concurrency" in t and (m := _CONC.search(t)):
            ev = Evidence.of(ln)
            facts.set_context(to_int(m[1]), ev)
            value = float(m[2])
            old = facts.concurrency.get(ln.rank)
            if old is None or value < old[0]:
                facts.concurrency[ln.rank] = (value, ev)
        # a pasted excerpt's pieces are glued without their spaces (forensics.audit.excerpt)
        if "max seq len" in t or (len(t) < 8192 and "maxseqlen" in "".join(t.split())):
            _errors(facts, ln)
        if "block_size" in t and (m := _BLOCK_SIZE.search(t)):
            block_size, size_ev = int(m[1]), Evidence.of(ln)
            facts.page_size, facts.page_evidence = block_size, size_ev
        if "max" in t and (m := _MAXLEN.search(t)) and "Maximum concurrency" not in t:
            facts.set_context(int(m[1] or m[2] or m[3]), Evidence.of(ln), override=False)
        if facts.model is None and (m := _MODEL.search(t)):
            facts.model = m[1]
        if facts.role is None and "kv_role" in t and (m := _ROLE.search(t)):
            facts.role, facts.role_evidence = _ROLES[m[1]], Evidence.of(ln)
    size = block_size or DEFAULT_BLOCK_SIZE
    for rank, n, ev in blocks:
        facts.add_pool(rank, Pool.derived(f"GPU blocks x {size}", Derivation(n, size, ev, size_ev, "vLLM"), 3))
    return facts


def _errors(facts: Facts, ln: LogLine) -> None:
    t, ev = ln.text, Evidence.of(ln)
    if m := _TOO_BIG.search(t):
        ctx, pool = int(m[1]), int(m[2])
        facts.set_context(ctx, ev)
        facts.proofs.append((f"vLLM refused to start: max seq len {ctx} > KV cache capacity {pool} tokens", pool, ev))
    elif m := _NEEDED.search(t):
        ctx = int(m[1])
        facts.set_context(ctx, ev)
        what = f"; estimated maximum model length {m[4]}" if m[4] else ""
        # the estimate is vLLM's, not a pool size the log states: kept in the reason only
        facts.proofs.append(
            (
                f"vLLM refused to start: {m[2]} GiB KV needed for {ctx} tokens > {m[3]} GiB available{what}",
                None,
                ev,
            )
        )


# the per-request lines (--enable-log-requests, --enable-log-outputs): their table of shapes
# (forensics.engines.vllm.shapes) and the reader derived from it; imported here, below what it reads
from forensics.engines.vllm.reader import READER, dated  # noqa: E402

ENGINE = Engine(NAME, "vLLM", MARKERS, KEYWORDS, STARTUP, parse, requests=READER, dated=dated)

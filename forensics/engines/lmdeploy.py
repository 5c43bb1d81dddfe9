"""LMDeploy (TurboMind and PyTorch engines) startup lines.

Pool: TurboMind `max cached tokens: N` (= max_block_count x cache_block_seq_len); else a derived
pool, a block count times the block length (never assumed). The count is TurboMind's
`[BlockManager] max_block_count = N` (src/turbomind/models/llama/BlockManager.cc) or the PyTorch
engine's `Building CacheEngine with config: CacheConfig(.., block_size=B, .., num_gpu_blocks=N,
..)` (lmdeploy/pytorch/engine/executor/base.py); `num_gpu_blocks=0` in the `backend_config=
PytorchEngineConfig(..)` dump (lmdeploy/serve/async_engine.py) means "size it from free memory",
not a count. The length is `cache_block_seq_len=` (TurbomindEngineConfig) or `block_size=` (the
PyTorch configs, and the executor's "Update `block_size=32`" warning), the last one logged. Note
that `[BlockManager] block_size = 64 MB` is bytes, not tokens. Context: `session_len=N` in the
engine config. `session_len truncated to N due to limited KV cache memory` proves the pool (N
tokens) is smaller than the configured session length.
"""

from __future__ import annotations

import re

from forensics.engines.facts import Derivation, Engine, Evidence, Facts, LogLine, Pool, loose, to_int

NAME = "lmdeploy"
STARTUP = re.compile(r"(?!x)x")
KEYWORDS = ("tokens", "block", "session_len", "EngineRole", "model", "[TM]", "EngineConfig", "lmdeploy")
MARKERS = (
    "[TM][",
    "[BlockManager]",
    "TurbomindEngineConfig",
    "PytorchEngineConfig",
    "lmdeploy",
    "max cached tokens",
    # TurboMind's warning when the KV cache cannot hold session_len (src/turbomind/engine/engine.cc)
    "due to limited KV cache memory",
)

_CACHED = re.compile(r"max cached tokens: (\d[\d,]*)")
_BLOCKS = re.compile(r"\[BlockManager\] max_block_count = (\d+)|(?<![\w.])num_gpu_blocks=(\d+)")
_SEQ_LEN = re.compile(r"(?<![\w.])(?:cache_block_seq_len|block_size)=(\d+)")
_SESSION = re.compile(r"(?<![\w.])session_len=(\d+)")
_TRUNC = loose(r"session_len`? truncated to (\d+)")  # also as an excerpt pasted over several lines
_ROLE = re.compile(r"role=<?EngineRole\.(\w+)")
_MODEL = re.compile(r"model_path='([^']*)'|model_name='([^']*)'")


def parse(lines: list[LogLine]) -> Facts:
    facts = Facts(NAME)
    block_len: tuple[int, Evidence] | None = None
    blocks: list[tuple[str, int, Evidence]] = []
    for ln in lines:
        t = ln.text
        if m := _CACHED.search(t):
            facts.add_pool(ln.rank, Pool("max cached tokens", to_int(m[1]), Evidence.of(ln), 1))
        if (m := _BLOCKS.search(t)) and (n := int(m[1] or m[2])) > 0:
            blocks.append((ln.rank, n, Evidence.of(ln)))
        if m := _SEQ_LEN.search(t):
            block_len = (int(m[1]), Evidence.of(ln))
            facts.page_size, facts.page_evidence = block_len
        if m := _TRUNC.search(t):
            n = int(m[1])
            reason = f"LMDeploy truncated session_len to {n}: the KV cache holds {n} tokens"
            facts.proofs.append((reason, n, Evidence.of(ln)))
        elif m := _SESSION.search(t):
            if not facts.proofs:
                facts.set_context(int(m[1]), Evidence.of(ln))
        if facts.role is None and (m := _ROLE.search(t)):
            role = m[1].lower()
            facts.role, facts.role_evidence = ("unified" if role == "hybrid" else role), Evidence.of(ln)
        if facts.model is None and (m := _MODEL.search(t)):
            facts.model = m[1] or m[2]
    if block_len is not None:
        size, size_ev = block_len
        for rank, n, ev in blocks:
            facts.add_pool(rank, Pool.derived(f"blocks x {size}", Derivation(n, size, ev, size_ev), 3))
    elif blocks:
        facts.notes.append("block count found but no block length (cache_block_seq_len) in the log")
    return facts


ENGINE = Engine(NAME, "LMDeploy", MARKERS, KEYWORDS, STARTUP, parse)

"""TensorRT-LLM (C++ runtime and PyTorch backend) startup lines.

Pool: `[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)` or the older
`Using N tokens in paged KV cache`; else a derived pool, blocks times tokens per block, from the
C++ runtime's cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp (the PyTorch backend logs through
the same KVCacheManager): `Max KV cache blocks per sequence: M [window size=W], tokens per
block=T, primary blocks=B, ..` per window, both factors on one line (the largest window, full
attention, binds); or `Number of blocks in KV cache primary pool: B` times `Number of tokens per
block: T.`, two lines. Context: `max_seq_len=N` / `Max sequence length` / `max sequence length=N`.
`Adjusted max_seq_len to N` (or the older `maxSequenceLen ... reduced to N`) means the engine cut
the configured length because the pool could not hold it: a proof.
"""

from __future__ import annotations

import re

from forensics.engines.facts import Derivation, Engine, Evidence, Facts, LogLine, Pool, loose, to_int

NAME = "trtllm"
STARTUP = re.compile(r"(?!x)x")  # no single once-per-start line: a file is one start
KEYWORDS = (
    "tokens",
    "seq",
    "Seq",
    "window",
    "Adjusted",
    "primary pool",
    "TensorRT-LLM",
    "TRT-LLM",
    "tensorrt_llm",
)
MARKERS = (
    "[TensorRT-LLM]",
    "[TRT-LLM]",
    "paged KV cache",
    "tensorrt_llm",
    "tokens per block",
    # the PyTorch backend's warnings when the KV cache cannot hold the configured length, which name
    # the engine without a prefix (tensorrt_llm/_torch/pyexecutor/resource_manager.py,
    # KVCacheManager.adjust_window_sizes_for_vswa)
    "Adjusted max_seq_len to",
    "in blocks_per_window",
)

_ALLOC = re.compile(r"Allocated ([\d.]+) ?GiB for max tokens in paged KV cache \((\d[\d,]*)\)")
_USING = re.compile(r"Using (\d[\d,]*) tokens in paged KV cache")
_TPB = re.compile(r"Number of tokens per block: (\d+)|tokens per block=(\d+)")
_PRIMARY = re.compile(r"Number of blocks in KV cache primary pool: (\d[\d,]*)")
_WINDOW = re.compile(r"\[window size=(\d+)\], tokens per block=(\d+), primary blocks=(\d+)")
_CTX = re.compile(
    r"(?<![\w.])max_seq_len[=:] ?(\d+)|Max sequence length:? ?(\d+)|max sequence length=(\d+)"
    r"|maxSequenceLen: (\d+)"
)
# loose: also as an excerpt pasted over several lines
_ADJUST = loose(r"Adjusted max_seq_len to (\d+)|maxSequenceLen are too large.*?reduced to (\d+)")
_ADJ_WINDOW = loose(r"Adjusted window size (\d+) to (\d+)")


def parse(lines: list[LogLine]) -> Facts:
    facts = Facts(NAME)
    tpb: tuple[int, Evidence] | None = None
    primary: list[tuple[str, int, Evidence]] = []
    windows: dict[str, list[tuple[int, Derivation]]] = {}
    adjusted_from: tuple[int, Evidence] | None = None
    for ln in lines:
        t = ln.text
        if m := _ALLOC.search(t):
            facts.add_pool(ln.rank, Pool("max tokens in paged KV cache", to_int(m[2]), Evidence.of(ln), 2))
        elif m := _USING.search(t):
            facts.add_pool(ln.rank, Pool("tokens in paged KV cache", to_int(m[1]), Evidence.of(ln), 2))
        if "window size=" in t and (m := _WINDOW.search(t)):
            ev = Evidence.of(ln)
            windows.setdefault(ln.rank, []).append((int(m[1]), Derivation(int(m[3]), int(m[2]), ev, ev)))
        if "tokens per block" in t and (m := _TPB.search(t)):
            tpb = (int(m[1] or m[2]), Evidence.of(ln))
            facts.page_size, facts.page_evidence = tpb
        if m := _PRIMARY.search(t):
            primary.append((ln.rank, to_int(m[1]), Evidence.of(ln)))
        if (m := _ADJ_WINDOW.search(t)) and adjusted_from is None:
            adjusted_from = (int(m[1]), Evidence.of(ln))
        if m := _ADJUST.search(t):
            ev, new = Evidence.of(ln), int(m[1] or m[2])
            configured = facts.context_len  # the configured length stays the context
            if configured is None and adjusted_from is not None:
                configured = adjusted_from[0]
                facts.set_context(configured, adjusted_from[1])
            facts.proofs.append((f"TensorRT-LLM cut max_seq_len to {new} to fit the KV cache", new, ev))
            facts.notes.append(f"engine enforces max_seq_len {new} after the cut; configured {configured}")
        elif m := _CTX.search(t):
            if not facts.proofs:  # after a cut, later max_seq_len lines print the reduced value
                facts.set_context(int(m[1] or m[2] or m[3] or m[4]), Evidence.of(ln), override=False)
    for rank, wins in windows.items():
        largest = max(w for w, _ in wins)
        for w, d in wins:
            facts.add_pool(rank, Pool.derived(f"window {w}", d, 1 if w == largest else 9))
    if tpb is not None:
        size, size_ev = tpb
        for rank, n, ev in primary:
            facts.add_pool(rank, Pool.derived(f"primary blocks x {size}", Derivation(n, size, ev, size_ev), 3))
    return facts


ENGINE = Engine(NAME, "TensorRT-LLM", MARKERS, KEYWORDS, STARTUP, parse)

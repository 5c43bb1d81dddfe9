"""SGLang (0.4.x to 0.5.23) startup and scheduler lines: KV pools, context length, role, page size.

Binding pool per rank: the pool rule of forensics.engines.sglang (POOL_SOURCES, the rule ingest's
node_config and the watcher take too), first present wins (lower Pool.priority):
  0 `full_layer_tokens=` of the sliding-window line (the full-attention pool binds, not the SWA one);
  1 `max_total_num_tokens=` of the scheduler line (what `max_req_input_len` is computed from);
  2 the first `KV Cache is allocated` (or 0.5.23 `<name> is allocated`) line of the rank;
and, as evidence the rule does not take as the pool:
  5 a second unlabeled pool line on the same rank (a draft model's or the SWA half: never binds
    while the first exists);
  7 `VA upper bound` (an upper bound: can prove too small, never proves a fit).
Pools labeled SWA/mamba never bind; a pool labeled draft/eagle/mtp/nextn binds only if alone. The
server's pool is the smallest rank's. Only the last start-up of a log is audited (forensics.audit).
"""

from __future__ import annotations

import re

from forensics.engines.facts import Engine, Evidence, Facts, LogLine, Pool, to_int
from forensics.engines.sglang import (
    ARG_CONTEXT,
    ARG_MODE,
    ARG_MODEL,
    ARG_PAGE,
    CONTEXT_LEN,
    DECODE_ROLE,
    MAX_TOTAL,
    NEVER_BINDS,
    OVER_LIMIT,
    POOL,
    POOL_PRIORITY,
    POOL_WARNING,
    PREFILL_ROLE,
    READER,
    SHAPES,
    SWA_POOLS,
    TOKENIZER_CONTEXT,
    TRUNCATED,
    pool_kind,
)

NAME = "sglang"
STARTUP = re.compile(r"server_args=")
MARKERS = (
    "server_args=",
    "KV Cache is allocated",
    "is allocated. dtype:",
    "max_total_num_tokens=",
    "exceeds the maximum allowed length",
    "KV pool holds",
    "full_layer_tokens=",
    "Memory pool end.",
    "sglang",
)

SECOND_POOL = 5  # a second binding pool line on the rank
VA_BOUND = 7  # a virtual pool's upper bound

# a line holding none of these is dropped before parsing (after the first lines, kept for detection)
KEYWORDS = ("tokens", "server", "warmup", "max_req_input_len", "Memory pool", "sglang")
# the start-up shapes parse reads, each tested by its literals (forensics.engines.sglang.shapes SHAPES:
# every line a shape's pattern matches holds one)
POOL_WORDS = SHAPES["kv_pool"].literals
SWA_WORDS = SHAPES["swa_pools"].literals
MAX_TOTAL_WORDS = SHAPES["max_total"].literals
OVER_LIMIT_WORDS = SHAPES["overlength"].literals
# the substrings parse's branches test (and STARTUP's, inside "server"): a line holding none is read by
# none, and the audit's sieve leaves it out (forensics.audit.lines)
READS = (
    *POOL_WORDS,
    *SWA_WORDS,
    *MAX_TOTAL_WORDS,
    "server",
    *OVER_LIMIT_WORDS,
    "max_req_input_len=",
    "KV pool holds",
    "context length",
    "warmup",
)


def _holds(text: str, words: tuple[str, ...]) -> bool:
    return any(w in text for w in words)


def parse(lines: list[LogLine]) -> Facts:
    facts = Facts(NAME)
    swa_sizes: set[int] = set()
    for ln in lines:
        t = ln.text
        if _holds(t, POOL_WORDS) and (m := POOL.search(t)):
            ev = Evidence.of(ln)
            name = m.group("name").strip()
            kind, prio = pool_kind(name)
            if m.group("what") == "VA upper bound":
                facts.add_pool(ln.rank, Pool(f"{kind} (VA upper bound)", to_int(m["n"]), ev, VA_BOUND, exact=False))
                continue
            allocated = POOL_PRIORITY["allocated_tokens"]
            if prio == allocated and any(p.priority in (allocated, SECOND_POOL) for p in facts.pools.get(ln.rank, [])):
                kind, prio = f"{kind} (second pool on this rank)", SECOND_POOL
            label = re.sub(r"\s*KV Cache$", "", name)
            facts.add_pool(ln.rank, Pool(f"{kind}: {label}" if label else kind, to_int(m["n"]), ev, prio))
        elif _holds(t, SWA_WORDS) and (m := SWA_POOLS.search(t)):
            ev = Evidence.of(ln)
            facts.add_pool(ln.rank, Pool("full_layer_tokens", to_int(m[1]), ev, POOL_PRIORITY["full_layer_tokens"]))
            facts.add_pool(ln.rank, Pool("swa_layer_tokens", to_int(m[2]), ev, NEVER_BINDS))
            swa_sizes.add(to_int(m[2]))
        elif _holds(t, MAX_TOTAL_WORDS) and (m := MAX_TOTAL.search(t)):
            ev = Evidence.of(ln)
            facts.add_pool(
                ln.rank, Pool("max_total_num_tokens", to_int(m[1]), ev, POOL_PRIORITY["max_total_num_tokens"])
            )
            if c := CONTEXT_LEN.search(t):
                facts.set_context(to_int(c[1]), ev)
        elif "server_args=" in t:
            _server_args(facts, ln)
        elif _holds(t, OVER_LIMIT_WORDS) and (m := OVER_LIMIT.search(t)):
            facts.max_input_seen.append((int(m[2]), Evidence.of(ln)))
        elif "max_req_input_len=" in t and (m := TRUNCATED.search(t)):
            facts.max_input_seen.append((int(m[1]), Evidence.of(ln)))
        elif "KV pool holds" in t and (m := POOL_WARNING.search(t)):
            ev = Evidence.of(ln)
            pool, ctx = to_int(m[1]), to_int(m[2])
            facts.proofs.append((f"engine warns: KV pool holds {pool} tokens < context {ctx}", pool, ev))
            if facts.context_len is None:
                facts.set_context(ctx, ev)
        elif "context length" in t and (m := TOKENIZER_CONTEXT.search(t)):
            if facts.context_len is None:
                facts.set_context(int(m[1] or m[2]), Evidence.of(ln))
        elif facts.role is None and ("server" in t or "warmup" in t):
            if DECODE_ROLE.search(t):
                facts.role, facts.role_evidence = "decode", Evidence.of(ln)
            elif PREFILL_ROLE.search(t):
                facts.role, facts.role_evidence = "prefill", Evidence.of(ln)
    _mark_swa_halves(facts, swa_sizes)
    return facts


def _server_args(facts: Facts, ln: LogLine) -> None:
    t, ev = ln.text, Evidence.of(ln)
    if (m := ARG_MODE.search(t)) and m[1] not in ("None", "null"):
        facts.role, facts.role_evidence = m[1], ev
    elif m:
        facts.role, facts.role_evidence = "unified", ev
    if (m := ARG_PAGE.search(t)) and m[1] != "None":
        facts.page_size, facts.page_evidence = int(m[1]), ev
    if m := ARG_MODEL.search(t):
        facts.model = m[1]
    if (m := ARG_CONTEXT.search(t)) and m[1] != "None":
        # the scheduler's context_len line, when present, is the value the server enforced
        if facts.context_len is None:
            facts.set_context(int(m[1]), ev)


def _mark_swa_halves(facts: Facts, swa_sizes: set[int]) -> None:
    """An unlabeled `KV Cache is allocated` line whose size is the SWA pool's never binds."""
    if not swa_sizes:
        return
    for rank, pools in facts.pools.items():
        facts.pools[rank] = [
            Pool("swa (by size)", p.tokens, p.evidence, NEVER_BINDS, p.exact)
            if p.priority in (POOL_PRIORITY["allocated_tokens"], SECOND_POOL)
            and p.tokens in swa_sizes
            and p.kind.startswith("kv")
            else p
            for p in pools
        ]


ENGINE = Engine(NAME, "SGLang", MARKERS, KEYWORDS, STARTUP, parse, requests=READER, reads=READS, signatures=True)

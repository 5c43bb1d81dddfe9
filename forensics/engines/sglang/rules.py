"""SGLang's rules the line shapes imply, Python and DuckDB macro alike: the input limit, the pool, the
clock bounds of its printed durations; the batch lines' field names; the start-up patterns the audit
reads inside lines (forensics.engines.sglang_startup). The lines themselves are described once, in
forensics.engines.sglang.shapes."""

from __future__ import annotations

import re
from collections.abc import Iterable

# --- the record prefix and the per-request lines (ingest) ---
# The scheduler's input limit: managers/tp_worker.py sets max_req_len = min(context_len - 1,
# max_total_num_tokens - 1) and max_req_input_len = max_req_len - 5; managers/utils.py
# validate_input_length rejects (or, on the PD prefill path of the incident, replaces with a
# placeholder) a prompt with len(input_ids) >= max_req_input_len. A decode node with the larger limit
# accepts it, so the leak window of a prefill/decode pair is [prefill limit, decode limit). The audit,
# the report and the simulator all take the limit and the window from here (Python and SQL alike).
INPUT_RESERVE = 5


def max_req_input_len(context_len: int, pool_tokens: int) -> int:
    return min(context_len - 1, pool_tokens - 1) - INPUT_RESERVE


def pool_from_limit(limit: int) -> int:
    """The pool an over-length line's limit M gives where the pool, not the context, bounds it
    (M = pool - 1 - INPUT_RESERVE): M + 6."""
    return limit + 1 + INPUT_RESERVE


def over_length(input_len: int, limit: int) -> bool:
    return input_len >= limit


# --- a node's KV pool: one rule, read by ingest (node_config.pool_tokens, and through it node_limits,
# the findings and the report), the audit and the watcher ---
# A rank's pool is the first of these sources its start-up lines state, each source's value its first
# line on the rank:
#   full_layer_tokens: model_executor/model_runner's `Use Sliding window memory pool. full_layer_tokens=F,
#     swa_layer_tokens=S` (a sliding-window model): the full-attention layers' pool is the one a long
#     prompt fills, and model_runner sets max_total_num_tokens to it (the SWA pool is the larger);
#   max_total_num_tokens: the scheduler's line; managers/tp_worker computes max_req_len, and so
#     max_req_input_len (the limit the leak window is made of), from this number;
#   allocated_tokens: the rank's first `KV Cache is allocated. #tokens: N` (0.5.23 `<name> is allocated.`)
#     line of a pool kind that binds (pool_kind): mem_cache/memory_pool sizes it from the same
#     max_total_num_tokens, so it stands in where the scheduler line is not in the log; a second such
#     line on the rank is a draft model's pool or the SWA half, never the pool.
# A node's pool is the smallest of its ranks' (the rank that fills first). A virtual pool's `VA upper
# bound` is no exact size and never the pool (the audit weighs it as a bound).
POOL_SOURCES = ("full_layer_tokens", "max_total_num_tokens", "allocated_tokens")
# the audit's rank of each source as its binding pool (lower binds first): the order above
POOL_PRIORITY = {source: i for i, source in enumerate(POOL_SOURCES)}


def rank_pool(*stated: int | None) -> int | None:
    """One rank's pool: the first source it states, its values given in POOL_SOURCES order (the macro
    sglang_rank_pool, a coalesce of the same)."""
    return next((v for v in stated if v is not None), None)


def node_pool(rank_pools: Iterable[int | None]) -> int | None:
    """A node's pool: the smallest of its ranks' pools (rank_pool) that are known."""
    return min((p for p in rank_pools if p is not None), default=None)


# --- how exact a Req Time Stats line's times are: the clock bounds of the findings and the watcher ---
# SGLang prints each duration as f"{seconds * 1e3:.2f}ms" (metrics/collector TimeStats.format_duration in
# 0.4.9 and 0.5.4, observability/req_time_stats in 0.5.11 and 0.5.23): to 1e-5 s. The simulator
# (forensics.simulate decode.py, engine.py) prints seconds with 4 decimals, `name=0.0123`: to 1e-4 s. A
# printed duration lies within half its last digit of the true one; the coarser of the two formats bounds
# both. A line's own time is cut, not rounded, to its resolution (`res`, the record prefix's digits).
DURATION_ROUNDING = 5e-5
# decode's landing, t_land = t_end - forward_duration - queue_duration: two durations' rounding
LANDING_ROUNDING = 2 * DURATION_ROUNDING
# decode's pre-allocation, t_alloc = t_land - transfer_duration: three
ALLOC_ROUNDING = 3 * DURATION_ROUNDING


def landing_offset(p_t: float, p_res: float, t_land: float, res: float) -> tuple[float, float]:
    """The bounds a room both nodes finished puts on the clocks' offset, prefill minus decode (seconds).
    Both lines mark the transfer's landing: prefill's Req Time Stats line at p_t (cut to p_res, so the
    truth is in [p_t, p_t + p_res)), and decode's t_land (its line's time is cut to res, its durations
    rounded: the truth is in [t_land - LANDING_ROUNDING, t_land + res + LANDING_ROUNDING]). The macros
    landing_offset_lo and landing_offset_hi are the same bounds in SQL (node_lifecycle.sql)."""
    return p_t - (t_land + res + LANDING_ROUNDING), p_t + p_res - t_land + LANDING_ROUNDING


def _double(x: float) -> str:
    return f"{x!r}::DOUBLE"


MACROS = {  # made on every connection (forensics.db.connect)
    "sglang_max_input(ctx, pool)": f"least(ctx - 1, pool - 1) - {INPUT_RESERVE}",
    "in_leak_window(n, prefill_limit, decode_limit)": "n >= prefill_limit AND n < decode_limit",
    f"sglang_rank_pool({', '.join(POOL_SOURCES)})": f"coalesce({', '.join(POOL_SOURCES)})",
    "landing_offset_lo(p_t, t_land, res)": f"p_t - (t_land + res + {_double(LANDING_ROUNDING)})",
    "landing_offset_hi(p_t, p_res, t_land)": f"p_t + p_res - t_land + {_double(LANDING_ROUNDING)}",
    "alloc_rounding()": _double(ALLOC_ROUNDING),
}

# field name -> column of batch_stats, per line kind (names of every release, 0.4.9 to 0.5.23; a hybrid
# pool's full-attention count stands for the pool)
BATCH_COMMON = {
    "#running-req": "running_req",
    "#token": "tokens_used",
    "#full token": "tokens_used",
    "token usage": "token_usage",
    "full token usage": "token_usage",
    "#queue-req": "queue_req",
}
BATCH_FIELDS = {
    "decode": BATCH_COMMON
    | {
        "pre-allocated usage": "prealloc_usage",
        "#prealloc-req": "prealloc_req",
        "#transfer-req": "transfer_req",
        "#retracted-req": "retracted_req",
        "gen throughput (token/s)": "throughput",
    },
    "prefill": BATCH_COMMON
    | {
        "#new-seq": "new_seq",
        "#new-token": "new_token",
        "#cached-token": "cached_token",
        "#pending-token": "pending_token",
        "#unbootstrapped-req": "bootstrap_req",  # 0.4.9
        "#prealloc-req": "bootstrap_req",  # 0.5.4, 0.5.11: the prefill's bootstrap queue
        "#bootstrap-req": "bootstrap_req",  # 0.5.23
        "#transferring-req": "inflight_req",  # 0.4.9
        "#inflight-req": "inflight_req",
        "input throughput (token/s)": "throughput",
    },
}
BATCH_REQUIRED = {"decode": ("running_req", "token_usage"), "prefill": ("new_seq", "new_token", "cached_token")}
BATCH_FLOATS = ("token_usage", "prealloc_usage", "throughput")

# --- fields inside start-up and scheduler lines (the lines are shapes: forensics.engines.sglang.shapes),
# read by the audit's parse and the node config's row builders ---
SERVER_ARG = re.compile(r"(?P<key>\w+)=(?P<val>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()]+)")
CONTEXT_LEN = re.compile(r"(?<![\w.])context_len=(\d[\d,]*)")
ARG_CONTEXT = re.compile(r"(?<![\w.])'?context_length'?\s*[=:]\s*(None|\d+)")
ARG_PAGE = re.compile(r"(?<![\w.])'?page_size'?\s*[=:]\s*(None|\d+)")
ARG_MODE = re.compile(r"(?<![\w.])'?disaggregation_mode'?\s*[=:]\s*'?(\w+)")
ARG_MODEL = re.compile(r"(?<![\w.])'?model_path'?\s*[=:]\s*'([^']*)'")
OVER_LIMIT = re.compile(r"Input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)")
TRUNCATED = re.compile(r"longer than the KV cache pool size.*?max_req_input_len=(\d+)")
POOL_WARNING = re.compile(r"KV pool holds (\d[\d,]*) tokens, fewer than --context-length (\d[\d,]*)")
TOKENIZER_CONTEXT = re.compile(
    r"longer than the model's context length \((\d+) tokens\)|maximum context length of (\d+) tokens"
)
DECODE_ROLE = re.compile(r"for decode server")
PREFILL_ROLE = re.compile(r"for prefill server|prefill disaggregation mode warmup")


# a pool that holds requests' KV (pool_kind): the allocated_tokens source of the pool rule
BINDING_PRIORITY = POOL_PRIORITY["allocated_tokens"]
DRAFT_PRIORITY = 6  # a draft model's pool: binds only where no other pool line is on the rank
NEVER_BINDS = 9  # a sliding-window or state pool: never the pool


def pool_kind(name: str) -> tuple[str, int]:
    """What a pool line's name says it holds, and its priority as the binding pool (lower binds first):
    sliding-window and state pools never bind (NEVER_BINDS), a draft model's binds only alone
    (DRAFT_PRIORITY), else BINDING_PRIORITY."""
    low = name.lower()
    if "swa" in low or "sliding" in low:
        return "swa", NEVER_BINDS
    if any(k in low for k in ("mamba", "ssm", "state", "conv")):
        return "state", NEVER_BINDS
    if any(k in low for k in ("draft", "eagle", "mtp", "nextn", "spec")):
        return "draft", DRAFT_PRIORITY
    return ("full" if "full" in low else "kv"), BINDING_PRIORITY

"""SGLang's log lines (0.4.x to 0.5.23), as its loggers write them.

Sources (sgl-project/sglang, python/sglang/srt/):
- record prefix `[YYYY-MM-DD HH:MM:SS(.ffffff)? TP0 ...] `: utils.configure_logger;
- `server_args=ServerArgs(...)`: entrypoints/engine (the startup dump of ServerArgs);
- `KV Cache is allocated. #tokens: N` (`<name> is allocated. dtype: ...` in 0.5.23, `VA upper bound`
  for virtual pools): mem_cache/memory_pool;
- `max_total_num_tokens=N, ..., context_len=C`: managers/scheduler (after the pool is sized);
- `full_layer_tokens=F, swa_layer_tokens=S`: model_executor/model_runner (sliding-window models);
- `Input length (L tokens) exceeds the maximum allowed length (M tokens)`: managers/scheduler, the
  over-length path that replaces the prompt with a placeholder (on the PD prefill path the prompt is
  replaced by a one-token placeholder instead of rejected: docs/evidence-bundle.md);
- `Req Time Stats(rid=..., bootstrap_room=..., input len=..., output len=..., type=...): <durations>`:
  managers/schedule_batch `Req.log_time_stats` (per finished request); the durations are
  metrics/collector `TimeStats.__str__` (0.4.9, 0.5.4: `name=12.34ms`, `start_time=`) and
  observability/req_time_stats `convert_to_duration` (0.5.11: `prealloc_queue_duration(12.34ms) =
  bootstrap(..) + alloc_wait(..); transfer_duration=..`, `start=` on the monotonic clock; 0.5.23:
  `ReqTimeStats(rid=.., input_len=.., cached_input_len=.., output_len=.., attempts=.., type=..)`,
  `entry_time=` on the wall clock);
- `{Prefill bootstrap|Prefill transfer|Decode handshake|Decode transfer} failed for request rank=N
  req.rid='..' req.bootstrap_room=N[ with exception KVTransferError(bootstrap_room=N): <reason>]`:
  disaggregation/prefill, disaggregation/decode (`decode_req.req.rid=` on decode), the exception's
  text from disaggregation/mooncake/conn (0.4.9-0.5.11) or disaggregation/common/conn (0.5.23);
- `Request {room} timed out after {s:.1f}s in KVPoll.Bootstrapping|WaitingForInput`: the failure
  reason the Mooncake/NIXL sender and receiver record (mooncake/conn 0.4.9-0.5.11, common/conn
  0.5.23), printed inside the failed-for-request line above;
- `Context corruption detected: Request {rid} (bootstrap_room={expected}) received metadata from
  bootstrap_room={actual}. Metadata buffer index: {idx}. ...`: disaggregation/decode (0.5.11, 0.5.23);
- `Deferred KV release for room {room} timed out after {timeout}s without a full drain ack ...` and
  `KV checksum mismatch [on a peer rank ]req={rid} bootstrap_room={room}[ expected=0x.. got=0x..]`:
  disaggregation/decode (0.5.23);
- `Losing connection with prefill instance (bootstrap_addr: ..), affected N requests` (0.4.9),
  `..), N requests affected` (0.5.4, 0.5.11), `Lost connection ..., N requests affected` (0.5.23):
  mooncake/conn, common/conn;
- `Init torch distributed begin.` (0.4.9-0.5.11), `Load weight begin. avail mem=..`:
  model_executor/model_runner; `The server is fired up and ready to roll!`: entrypoints/http_server;
- `Decode batch[ [N]], #running-req: .., #token: .., token usage: .., [pre-allocated usage: ..,
  #prealloc-req: .., #transfer-req: .., #retracted-req: ..,] cuda graph: .., gen throughput (token/s):
  .., #queue-req: ..` every --decode-log-interval decode steps, and `Prefill batch[ [N]], #new-seq: ..,
  #new-token: .., #cached-token: .., [#token: ..,] token usage: .., ...` per prefill batch:
  managers/scheduler (0.4.9: `Decode batch. `, `Prefill batch. `, the PD prefill queues as
  #unbootstrapped-req / #transferring-req, no #prealloc-req / #transfer-req on decode),
  managers/scheduler_metrics_mixin (0.5.4: ` [forward_ct]` always), observability/
  scheduler_metrics_mixin (0.5.11: ` [N]` with SGLANG_LOG_FORWARD_ITERS only; #pending-token) and
  managers/scheduler_components/metrics_reporter (0.5.23: #bootstrap-req, #optimistic-req). `#token`
  is max_total_num_tokens minus the allocator's available tokens minus the radix cache's evictable
  ones; `pre-allocated usage` the transfer queue's input tokens over max_total_num_tokens;
- `--log-requests` text lines `Receive: obj=GenerateReqInput(..)[, headers={..}]` and `Finish:
  obj=GenerateReqInput(..)[, headers={..}], out={.., 'meta_info': {'id': .., ..}}`:
  managers/tokenizer_manager (0.4.9, 0.5.4) and utils/request_logger (0.5.11, 0.5.23), rendered by
  `dataclass_to_string_truncated` (Python reprs; at level 2 a long string or list is cut to its two
  ends joined by ` ... `). From 0.5.11 they go through a `%(message)s` formatter: no record prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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

PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<ms>\.\d{1,6})?(?P<rank>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$"
)
OVERLENGTH = re.compile(
    r"Input length \((?P<L>\d+) tokens\) exceeds the maximum allowed length \((?P<M>\d+) tokens\)"
    r".*?self\.rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\")"
)
TIME_STATS = re.compile(
    r"(?:Req Time Stats|ReqTimeStats)\(rid=(?P<rid>[^,]+?)(?:, bootstrap_room=(?P<room>-?\d+|None))?, "
    r"input[ _]len=(?P<inp>\d+), (?:cached_input_len=\d+, )?output[ _]len=(?P<out>\d+), (?:attempts=\d+, )?"
    r"type=(?P<type>\w+)\)"
)
# one duration in the durations after a Req Time Stats line: `name=12.34ms` or, for 0.5.11's totals and
# sub-phases, `name(12.34ms)`; a value without `ms` is in seconds
DURATION = re.compile(r"(?<![\w.#])(?P<name>[a-z_]+)(?:=|\()(?P<v>-?\d+(?:\.\d+)?)(?P<ms>ms)?(?![\w.])")
# ... and when the request entered the scheduler (Unix seconds, the node's clock): nothing of it is in
# the node's KV pool before then. 0.5.23 calls it entry_time; 0.5.11's `start=` is on the monotonic
# clock and is not read
START_TIME = re.compile(r"(?<![\w.])(?:start_time|entry_time)=(?P<s>\d+(?:\.\d+)?)")
# below this a start_time is a monotonic clock reading (0.5.4 prints time.perf_counter()), not a time
MIN_WALLCLOCK_S = 1e9
XFER_FAILED = re.compile(
    r"(?P<side>Decode|Prefill) (?P<stage>transfer|bootstrap|handshake) failed for request rank=\d+ "
    r"\S*rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\")(?: \S*bootstrap_room=(?P<room>\d+))?"
    # 0.5.16 may print the rid alone, the exception's own text after it (llm-d/llm-d#2433:
    # "Prefill transfer failed for request rank=0 req.rid='...' with exception PD Disaggregation does NOT ...")
    r"(?: with exception (?:\w+\(bootstrap_room=\d+\): )?(?P<reason>.*))?"
)
# the sender (Bootstrapping: decode never sent its page indices) or the receiver (WaitingForInput:
# prefill never signalled the transfer done) gave up on a room
KVPOLL_TIMEOUT = re.compile(r"Request (?P<room>\d+) timed out after (?P<s>\d+(?:\.\d+)?)s in KVPoll\.(?P<state>\w+)")
# decode read another room's first token from the metadata buffer: the slot was reused under it
CONTEXT_CORRUPTION = re.compile(
    r"Context corruption detected: Request (?P<rid>.+?) \(bootstrap_room=(?P<room>\d+)\) received metadata "
    r"from bootstrap_room=(?P<actual>\d+)\. Metadata buffer index: (?P<idx>-?\d+)\."
)
# decode gave an aborted room's pages back before prefill acknowledged that its writes had drained
DEFERRED_RELEASE_TIMEOUT = re.compile(
    r"Deferred KV release for room (?P<room>\d+) timed out after (?P<s>\d+(?:\.\d+)?)s without a full drain ack"
)
# the KV that landed in decode's pages is not the KV prefill sent (--disaggregation-enable-kv-checksum)
KV_CHECKSUM_MISMATCH = re.compile(
    r"KV checksum mismatch (?P<peer>on a peer rank )?req=(?P<rid>\S+) bootstrap_room=(?P<room>\d+)"
    r"(?: expected=(?P<expected>0x[0-9a-f]+) got=(?P<got>0x[0-9a-f]+))?"
)
# decode's heartbeat to a prefill failed: every room in flight from it is marked Failed
PREFILL_LOST = re.compile(
    r"(?:Losing|Lost) connection with prefill instance \(bootstrap_addr: [^)]*\), "
    r"(?:affected \d+ requests|\d+ requests affected)"
)
# a server process (re)starts: its pool is new and empty from here on
STARTUP = re.compile(r"Init torch distributed begin\.|Load weight begin\.")
SERVER_READY = re.compile(r"The server is fired up and ready to roll!")
# the periodic batch lines: a kind, the forward count where printed, then `name: value` fields joined by
# ', ' (a hybrid pool's 0.4.9 `#token: full=N, swa=M` continues a field: forensics.ingest.batch_lines)
BATCH_LINE = re.compile(r"(?P<kind>Prefill|Decode) batch(?: \[(?P<iter>\d+)\])?[.,] (?P<body>#.*)$")
# what a batch line that does not parse still looks like (rejected, not ignored)
BATCH_MARKERS = tuple(f"{k} batch{s}" for k in ("Decode", "Prefill") for s in (", #", ". #", " ["))
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

# --log-requests text lines; what follows `obj=` is read by read_fields
REQUEST_LOG = re.compile(r"(?P<event>Receive|Finish): obj=(?P<cls>\w+)\(")

# --- startup and scheduler lines: the node's config (ingest) and the pool audit ---
SERVER_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)\)?\s*$")
SERVER_ARG = re.compile(r"(?P<key>\w+)=(?P<val>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()]+)")
POOL = re.compile(
    r"(?P<name>[\w\- ]{0,60}?)\s*(?P<what>is allocated|VA upper bound)\.\s*(?:dtype:\s*[^,]*,\s*)?"
    r"#tokens:\s*(?P<n>\d[\d,]*)"
)
SWA_POOLS = re.compile(r"full_layer_tokens=(\d[\d,]*),\s*swa_layer_tokens=(\d[\d,]*)")
MAX_TOTAL = re.compile(r"max_total_num_tokens=(\d[\d,]*)")
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


# --- the line shapes: the same table read by the per-line reader and the bulk reader ---
@dataclass(frozen=True)
class Shape:
    """One kind of line SGLang writes, as both of ingest's readers take it.

    `pattern` is what the per-line reader (forensics.ingest.engine, the reference) matches on the
    message. `literals` are substrings one of which every line it matches holds: a line holding none
    of any shape's (nor a READ_MARKERS entry) gives no row, so the bulk reader (forensics.ingest.bulk)
    types it `plain` without the Python reader. `bulk`, where set, is an RE2 pattern on the whole message
    that admits a subset of `pattern`'s lines, in the form whose fields the bulk reader's SQL reads;
    the rest of that shape's lines go to the per-line reader."""

    pattern: re.Pattern[str]
    literals: tuple[str, ...]
    bulk: str | None = None


# RE2 fragments of the bulk patterns: a number, and a repr'd value without quotes, brackets or commas
# inside strings (a value that has them is left to read_fields)
BULK_NUM = r"[0-9]+(?:\.[0-9]+)?"
BULK_INT = r"0|-?[1-9][0-9]*"
_B_STR = r"'[^'\\,=(){}\[\]\"]*'"
_B_SV = rf"(?:{_B_STR}|-?[0-9]+(?:\.[0-9]+)?|None|True|False)"
_B_D0 = rf"\{{(?:{_B_STR}: {_B_SV}(?:, {_B_STR}: {_B_SV})*)?\}}"
_B_V1 = rf"(?:{_B_SV}|{_B_D0})"
BULK_DICT = rf"\{{(?:{_B_STR}: {_B_V1}(?:, {_B_STR}: {_B_V1})*)?\}}"
_B_OBJ = rf"[A-Za-z0-9_]+={_B_SV}(?:, [A-Za-z0-9_]+={_B_SV})*"
# the record prefix (PREFIX) with printable fields: ts, ms, rank, msg
PREFIX_BULK = r"^\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]{1,6})?((?: [A-Z_]+[0-9]+)*)\] (.*)$"

# the kind each shape gives in engine_lines, in the order the per-line reader tries them (a logged
# request first and anchored: its prompt may quote any other line)
SHAPES: dict[str, Shape] = {
    # obj's fields (group 1)
    "received": Shape(REQUEST_LOG, ("Receive: obj=",), rf"^Receive: obj=[A-Za-z0-9_]+\(({_B_OBJ})\)$"),
    # obj's fields (group 1) and out's meta_info (group 2)
    "finished": Shape(
        REQUEST_LOG,
        ("Finish: obj=",),
        rf"^Finish: obj=[A-Za-z0-9_]+\(({_B_OBJ})\), (?:[A-Za-z0-9_]+=(?:{_B_SV}|{BULK_DICT}), )*"
        rf"out=\{{'meta_info': ({BULK_DICT})\}}$",
    ),
    # kind, iter, body: printable ASCII (batch_lines splits the body)
    "batch": Shape(
        BATCH_LINE, ("Prefill batch", "Decode batch"), r"^(Prefill|Decode) batch(?: \[([0-9]+)\])?[.,] (#[ -~]*)$"
    ),
    "overlength": Shape(OVERLENGTH, ("Input length (",)),
    # rid, room, inp, out, type, and the durations as `name=number[ms]` pairs (tail)
    "time_stats": Shape(
        TIME_STATS,
        ("Req Time Stats(", "ReqTimeStats("),
        r"^(?:Req Time Stats|ReqTimeStats)\(rid=([^,\s()]+?)(?:, bootstrap_room=(-?[0-9]+|None))?, "
        r"input[ _]len=([0-9]+), (?:cached_input_len=[0-9]+, )?output[ _]len=([0-9]+), (?:attempts=[0-9]+, )?"
        rf"type=([A-Za-z0-9_]+)\)((?:(?:: |, )[a-z_]+={BULK_NUM}(?:ms)?)*)$",
    ),
    "transfer_failed": Shape(XFER_FAILED, ("failed for request rank=",)),
    "kvpoll_timeout": Shape(KVPOLL_TIMEOUT, ("s in KVPoll.",)),
    "context_corruption": Shape(CONTEXT_CORRUPTION, ("Context corruption detected: Request ",)),
    "deferred_release_timeout": Shape(DEFERRED_RELEASE_TIMEOUT, ("Deferred KV release for room ",)),
    "kv_checksum_mismatch": Shape(KV_CHECKSUM_MISMATCH, ("KV checksum mismatch ",)),
    "prefill_connection_lost": Shape(PREFILL_LOST, ("connection with prefill instance (bootstrap_addr: ",)),
    "startup": Shape(STARTUP, ("Init torch distributed begin.", "Load weight begin.")),
    "server_ready": Shape(SERVER_READY, ("The server is fired up and ready to roll!",)),
    "server_args": Shape(SERVER_ARGS, ("server_args=ServerArgs(",)),
    "swa_pools": Shape(SWA_POOLS, ("full_layer_tokens=",)),
    "kv_pool": Shape(POOL, ("is allocated", "VA upper bound")),  # and kv_pool_not_binding
    "max_total": Shape(MAX_TOTAL, ("max_total_num_tokens=",)),
}
# a line holding one of these that no shape reads is rejected, not ignored: it looks like a line the
# analysis reads whose fields did not parse
READ_MARKERS = (
    "server_args=ServerArgs(",
    "KV Cache",
    "max_total_num_tokens=",
    "Input length (",
    "Req Time Stats(",
    "ReqTimeStats(",
    "failed for request rank=",
    "s in KVPoll.",
    "Context corruption detected",
    "Deferred KV release for room",
    "KV checksum mismatch",
    "connection with prefill instance",
    "Receive: obj=",
    "Finish: obj=",
    *BATCH_MARKERS,
)
# what a line must hold for the per-line reader to give it more than its plain engine_lines row
TRIGGERS = tuple(sorted({*READ_MARKERS, *(lit for shape in SHAPES.values() for lit in shape.literals)}))

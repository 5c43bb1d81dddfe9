"""SGLang's log lines (0.4.x to 0.5.23), as its loggers write them: the package holds the one table of
their shapes (shapes.SHAPES: each shape's pattern, its RE2 subset for DuckDB, its row builder, its order),
the rows they give (rows), the per-line reader derived from the table (reader.READER, the engine entry's
line reader) and the rules the lines imply, Python and DuckDB macro alike (rules: the input limit, the
pool, the clock bounds). Every name the package exported as one module is exported here.

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

from forensics.engines import integrity
from forensics.engines.sglang import rules, shapes
from forensics.engines.sglang.fields import BULK_NUM, DURATION, MIN_WALLCLOCK_S, START_TIME
from forensics.engines.sglang.reader import (
    READER,
)
from forensics.engines.sglang.rules import (
    ALLOC_ROUNDING,
    ARG_CONTEXT,
    ARG_MODE,
    ARG_MODEL,
    ARG_PAGE,
    BATCH_COMMON,
    BATCH_FIELDS,
    BATCH_FLOATS,
    BATCH_REQUIRED,
    BINDING_PRIORITY,
    CONTEXT_LEN,
    DECODE_ROLE,
    DRAFT_PRIORITY,
    DURATION_ROUNDING,
    INPUT_RESERVE,
    LANDING_ROUNDING,
    NEVER_BINDS,
    OVER_LIMIT,
    POOL_PRIORITY,
    POOL_SOURCES,
    POOL_WARNING,
    PREFILL_ROLE,
    SERVER_ARG,
    TOKENIZER_CONTEXT,
    TRUNCATED,
    landing_offset,
    max_req_input_len,
    node_pool,
    over_length,
    pool_from_limit,
    pool_kind,
    rank_pool,
)
from forensics.engines.sglang.shapes import (
    BATCH_LINE,
    BATCH_MARKERS,
    BULK_DICT,
    BULK_INT,
    CONTEXT_CORRUPTION,
    DEFERRED_RELEASE_TIMEOUT,
    KV_CHECKSUM_MISMATCH,
    KVPOLL_TIMEOUT,
    MAX_TOTAL,
    OVERLENGTH,
    POOL,
    PREFILL_LOST,
    PREFIX,
    PREFIX_BULK,
    PREFIX_HEAD,
    READ_MARKERS,
    REQUEST_LOG,
    SERVER_ARGS,
    SERVER_READY,
    SHAPES,
    STARTUP,
    SWA_POOLS,
    TIME_STATS,
    TRIGGERS,
    XFER_FAILED,
    Shape,
)

# made on every connection (forensics.db.connect): the rules' and the shapes' patterns
MACROS = rules.MACROS | shapes.MACROS | integrity.MACROS  # the canary's reasons (its lines are shapes)

__all__ = [
    "ALLOC_ROUNDING",
    "ARG_CONTEXT",
    "ARG_MODE",
    "ARG_MODEL",
    "ARG_PAGE",
    "BATCH_COMMON",
    "BATCH_FIELDS",
    "BATCH_FLOATS",
    "BATCH_LINE",
    "BATCH_MARKERS",
    "BATCH_REQUIRED",
    "BINDING_PRIORITY",
    "BULK_DICT",
    "BULK_INT",
    "BULK_NUM",
    "CONTEXT_CORRUPTION",
    "CONTEXT_LEN",
    "DECODE_ROLE",
    "DEFERRED_RELEASE_TIMEOUT",
    "DRAFT_PRIORITY",
    "DURATION",
    "DURATION_ROUNDING",
    "INPUT_RESERVE",
    "KVPOLL_TIMEOUT",
    "KV_CHECKSUM_MISMATCH",
    "LANDING_ROUNDING",
    "MACROS",
    "MAX_TOTAL",
    "MIN_WALLCLOCK_S",
    "NEVER_BINDS",
    "OVERLENGTH",
    "OVER_LIMIT",
    "POOL",
    "POOL_PRIORITY",
    "POOL_SOURCES",
    "POOL_WARNING",
    "PREFILL_LOST",
    "PREFILL_ROLE",
    "PREFIX",
    "PREFIX_BULK",
    "PREFIX_HEAD",
    "READER",
    "READ_MARKERS",
    "REQUEST_LOG",
    "SERVER_ARG",
    "SERVER_ARGS",
    "SERVER_READY",
    "SHAPES",
    "STARTUP",
    "START_TIME",
    "SWA_POOLS",
    "Shape",
    "TIME_STATS",
    "TOKENIZER_CONTEXT",
    "TRIGGERS",
    "TRUNCATED",
    "XFER_FAILED",
    "landing_offset",
    "max_req_input_len",
    "node_pool",
    "over_length",
    "pool_from_limit",
    "pool_kind",
    "rank_pool",
]

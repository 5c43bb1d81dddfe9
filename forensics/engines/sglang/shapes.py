"""SGLang's line shapes: the one table (SHAPES) where a line SGLang writes is described. Each shape holds
its Python pattern (what the per-line reader, the reference, matches on the message), its literals
(substrings every line it matches holds), its row builder, and where the bulk readers type it, its RE2
subset (the form whose fields their SQL reads); the table's order is the order the per-line reader
tries the shapes. The readers are derived from it: the per-line reader (forensics.engines.sglang.reader),
ingest's bulk reader (forensics.ingest.bulk, through the macros below), the watcher's chunk reader
(forensics.watch.chunks: line_pattern) and the audit's sieve (the literals, READ_MARKERS).
Where each line comes from in SGLang's source: the package's docstring (forensics.engines.sglang)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from forensics.engines import integrity
from forensics.engines.sglang.fields import (
    BULK_DURATION_PAIR,
    BULK_START,
    DURATIONS,
    Builder,
    batch,
    bulk_duration,
    canary,
    checksum,
    context_corruption,
    deferred_release,
    kind,
    kv_pool,
    kvpoll_timeout,
    max_total,
    mooncake_failure,
    overlength,
    request_log,
    server_args_line,
    swa_pools,
    time_stats,
    transfer_failed,
)

# the record prefix `[YYYY-MM-DD HH:MM:SS(.ffffff)? TP0 ...] ` and its message
PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<ms>\.\d{1,6})?(?P<rank>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$"
)
# ... in RE2 with printable fields: ts, ms, rank, msg
PREFIX_BULK = r"^\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]{1,6})?((?: [A-Z_]+[0-9]+)*)\] (.*)$"
# ... without its message: a match's groups tell where the message starts (its `(.*)$` matches any rest
# of a line, which holds no newline; capturing it costs more than the rest of a bulk pass)
PREFIX_HEAD = PREFIX_BULK.removesuffix("(.*)$")

# RE2 fragments of the bulk patterns: a number, and a repr'd value without quotes, brackets or commas
# inside strings (a value that has them is left to read_fields)
BULK_INT = r"0|-?[1-9][0-9]*"
_B_STR = r"'[^'\\,=(){}\[\]\"]*'"
_B_SV = rf"(?:{_B_STR}|-?[0-9]+(?:\.[0-9]+)?|None|True|False)"
_B_D0 = rf"\{{(?:{_B_STR}: {_B_SV}(?:, {_B_STR}: {_B_SV})*)?\}}"
_B_V1 = rf"(?:{_B_SV}|{_B_D0})"
BULK_DICT = rf"\{{(?:{_B_STR}: {_B_V1}(?:, {_B_STR}: {_B_V1})*)?\}}"
_B_OBJ = rf"[A-Za-z0-9_]+={_B_SV}(?:, [A-Za-z0-9_]+={_B_SV})*"


@dataclass(frozen=True)
class Shape:
    """One kind of line SGLang writes.

    `pattern`: what the per-line reader matches on the message (`anchored`: at its start). `literals`:
    substrings one of which every line it matches holds: the per-line reader tries the pattern only on a
    message holding one, and a line holding none of any shape's (nor a READ_MARKERS entry) gives no row,
    so the bulk reader types it `plain` without the Python reader. `build`: the rows of a match. `bulk`,
    where set, an RE2 pattern on the whole message admitting a subset of `pattern`'s lines, in the form
    whose fields the bulk readers read (`ascii`: only on printable ASCII); the rest of the shape's lines
    go to the per-line reader."""

    pattern: re.Pattern[str]
    literals: tuple[str, ...]
    build: Builder
    bulk: str | None = None
    anchored: bool = False
    ascii: bool = False


# --- the table: the kind each shape gives in engine_lines, in the order the per-line reader tries them
# (a logged request first and anchored: its prompt may quote any other line) ---
# --log-requests text lines; Receive and Finish share the pattern (the builder reads `event`)
_REQUEST_LOG = re.compile(r"(?P<event>Receive|Finish): obj=(?P<cls>\w+)\(")
# the sender (Bootstrapping: decode never sent its page indices) or the receiver (WaitingForInput:
# prefill never signalled the transfer done) gave up on a room; also the reason of a failed transfer
_KVPOLL = re.compile(r"Request (?P<room>\d+) timed out after (?P<s>\d+(?:\.\d+)?)s in KVPoll\.(?P<state>\w+)")
SHAPES: dict[str, Shape] = {
    # bulk: obj's fields (group 1)
    "received": Shape(
        _REQUEST_LOG,
        ("Receive: obj=",),
        request_log,
        rf"^Receive: obj=[A-Za-z0-9_]+\(({_B_OBJ})\)$",
        anchored=True,
        ascii=True,
    ),
    # bulk: obj's fields (group 1) and out's meta_info (group 2)
    "finished": Shape(
        _REQUEST_LOG,
        ("Finish: obj=",),
        request_log,
        rf"^Finish: obj=[A-Za-z0-9_]+\(({_B_OBJ})\), (?:[A-Za-z0-9_]+=(?:{_B_SV}|{BULK_DICT}), )*"
        rf"out=\{{'meta_info': ({BULK_DICT})\}}$",
        anchored=True,
        ascii=True,
    ),
    # the periodic batch lines, the most frequent, anchored too: a kind, the forward count where printed,
    # then `name: value` fields joined by ', ' (a hybrid pool's 0.4.9 `#token: full=N, swa=M` continues a
    # field: rows.batch_fields); bulk: kind, iter, body of printable ASCII (forensics.ingest.bulk reads the
    # body by template)
    "batch": Shape(
        re.compile(r"(?P<kind>Prefill|Decode) batch(?: \[(?P<iter>\d+)\])?[.,] (?P<body>#.*)$"),
        ("Prefill batch", "Decode batch"),
        batch,
        r"^(Prefill|Decode) batch(?: \[([0-9]+)\])?[.,] (#[ -~]*)$",
        anchored=True,
    ),
    "overlength": Shape(
        re.compile(
            r"Input length \((?P<L>\d+) tokens\) exceeds the maximum allowed length \((?P<M>\d+) tokens\)"
            r".*?self\.rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\")"
        ),
        ("Input length (",),
        overlength,
    ),
    # bulk: rid, room, inp, out, type, and the durations as `name=number[ms]` pairs (tail)
    "time_stats": Shape(
        re.compile(
            r"(?:Req Time Stats|ReqTimeStats)\(rid=(?P<rid>[^,]+?)(?:, bootstrap_room=(?P<room>-?\d+|None))?, "
            r"input[ _]len=(?P<inp>\d+), (?:cached_input_len=\d+, )?output[ _]len=(?P<out>\d+), (?:attempts=\d+, )?"
            r"type=(?P<type>\w+)\)"
        ),
        ("Req Time Stats(", "ReqTimeStats("),
        time_stats,
        r"^(?:Req Time Stats|ReqTimeStats)\(rid=([^,\s()]+?)(?:, bootstrap_room=(-?[0-9]+|None))?, "
        r"input[ _]len=([0-9]+), (?:cached_input_len=[0-9]+, )?output[ _]len=([0-9]+), (?:attempts=[0-9]+, )?"
        rf"type=([A-Za-z0-9_]+)\)((?:{BULK_DURATION_PAIR})*)$",
    ),
    "transfer_failed": Shape(
        re.compile(
            r"(?P<side>Decode|Prefill) (?P<stage>transfer|bootstrap|handshake) failed for request rank=\d+ "
            r"\S*rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\")(?: \S*bootstrap_room=(?P<room>\d+))?"
            # 0.5.16 may print the rid alone, the exception's own text after it (llm-d/llm-d#2433:
            # "Prefill transfer failed for request rank=0 req.rid='...' with exception PD Disaggregation does NOT ...")
            r"(?: with exception (?:\w+\(bootstrap_room=\d+\): )?(?P<reason>.*))?"
        ),
        ("failed for request rank=",),
        transfer_failed(_KVPOLL),
    ),
    "kvpoll_timeout": Shape(
        _KVPOLL,
        ("s in KVPoll.",),
        kvpoll_timeout,
    ),
    # decode read another room's first token from the metadata buffer: the slot was reused under it
    "context_corruption": Shape(
        re.compile(
            r"Context corruption detected: Request (?P<rid>.+?) \(bootstrap_room=(?P<room>\d+)\) received metadata "
            r"from bootstrap_room=(?P<actual>\d+)\. Metadata buffer index: (?P<idx>-?\d+)\."
        ),
        ("Context corruption detected: Request ",),
        context_corruption,
    ),
    # decode gave an aborted room's pages back before prefill acknowledged that its writes had drained
    "deferred_release_timeout": Shape(
        re.compile(
            r"Deferred KV release for room (?P<room>\d+) timed out after (?P<s>\d+(?:\.\d+)?)s without a full drain ack"
        ),
        ("Deferred KV release for room ",),
        deferred_release,
    ),
    # the KV that landed in decode's pages is not the KV prefill sent (--disaggregation-enable-kv-checksum)
    "kv_checksum_mismatch": Shape(
        re.compile(
            r"KV checksum mismatch (?P<peer>on a peer rank )?req=(?P<rid>\S+) bootstrap_room=(?P<room>\d+)"
            r"(?: expected=(?P<expected>0x[0-9a-f]+) got=(?P<got>0x[0-9a-f]+))?"
        ),
        ("KV checksum mismatch ",),
        checksum,
    ),
    # the KV canary (--kv-canary log|raise) found a slot whose stamp is not what its holder wrote; the
    # pattern is searched, so the RuntimeError of raise mode is read too
    "kv_canary_violation": Shape(integrity.CANARY, ("kv_canary violation: ",), canary),
    # Mooncake's transfer engine (SGLang's default transfer backend) failed an RDMA slice; glog's prefix
    "mooncake_failure": Shape(
        integrity.MOONCAKE_FAILURE, (integrity.INTEGRITY["mooncake_failure"].literal,), mooncake_failure
    ),
    # decode's heartbeat to a prefill failed: every room in flight from it is marked Failed
    "prefill_connection_lost": Shape(
        re.compile(
            r"(?:Losing|Lost) connection with prefill instance \(bootstrap_addr: [^)]*\), "
            r"(?:affected \d+ requests|\d+ requests affected)"
        ),
        ("connection with prefill instance (bootstrap_addr: ",),
        kind("prefill_connection_lost"),
    ),
    # a server process (re)starts: its pool is new and empty from here on
    "startup": Shape(
        re.compile(r"Init torch distributed begin\.|Load weight begin\."),
        ("Init torch distributed begin.", "Load weight begin."),
        kind("startup"),
    ),
    "server_ready": Shape(
        re.compile(r"The server is fired up and ready to roll!"),
        ("The server is fired up and ready to roll!",),
        kind("server_ready"),
    ),
    # the start-up and scheduler lines: the node's config (ingest) and the pool audit
    # (forensics.engines.sglang_startup)
    "server_args": Shape(
        re.compile(r"server_args=ServerArgs\((?P<body>.*)\)?\s*$"), ("server_args=ServerArgs(",), server_args_line
    ),
    "swa_pools": Shape(
        re.compile(r"full_layer_tokens=(\d[\d,]*),\s*swa_layer_tokens=(\d[\d,]*)"), ("full_layer_tokens=",), swa_pools
    ),
    # and kv_pool_not_binding
    "kv_pool": Shape(
        re.compile(
            r"(?P<name>[\w\- ]{0,60}?)\s*(?P<what>is allocated|VA upper bound)\.\s*(?:dtype:\s*[^,]*,\s*)?"
            r"#tokens:\s*(?P<n>\d[\d,]*)"
        ),
        ("is allocated", "VA upper bound"),
        kv_pool,
    ),
    "max_total": Shape(re.compile(r"max_total_num_tokens=(\d[\d,]*)"), ("max_total_num_tokens=",), max_total),
}

# the shapes' patterns by the names the audit's parse and the rest of the package import
REQUEST_LOG = _REQUEST_LOG
BATCH_LINE = SHAPES["batch"].pattern
OVERLENGTH = SHAPES["overlength"].pattern
TIME_STATS = SHAPES["time_stats"].pattern
XFER_FAILED = SHAPES["transfer_failed"].pattern
KVPOLL_TIMEOUT = SHAPES["kvpoll_timeout"].pattern
CONTEXT_CORRUPTION = SHAPES["context_corruption"].pattern
DEFERRED_RELEASE_TIMEOUT = SHAPES["deferred_release_timeout"].pattern
KV_CHECKSUM_MISMATCH = SHAPES["kv_checksum_mismatch"].pattern
PREFILL_LOST = SHAPES["prefill_connection_lost"].pattern
STARTUP = SHAPES["startup"].pattern
SERVER_READY = SHAPES["server_ready"].pattern
SERVER_ARGS = SHAPES["server_args"].pattern
SWA_POOLS = SHAPES["swa_pools"].pattern
POOL = SHAPES["kv_pool"].pattern
MAX_TOTAL = SHAPES["max_total"].pattern

# what a batch line that does not parse still looks like (rejected, not ignored)
BATCH_MARKERS = tuple(f"{k} batch{s}" for k in ("Decode", "Prefill") for s in (", #", ". #", " ["))
# a line holding one of these that no shape reads is rejected, not ignored: it looks like a line the
# analysis reads whose fields did not parse
READ_MARKERS = (
    "server_args=ServerArgs(",
    "KV Cache",
    "max_total_num_tokens=",
    *SHAPES["overlength"].literals,
    *SHAPES["time_stats"].literals,
    *SHAPES["transfer_failed"].literals,
    *SHAPES["kvpoll_timeout"].literals,
    "Context corruption detected",
    "Deferred KV release for room",
    "KV checksum mismatch",
    "kv_canary violation",
    "connection with prefill instance",
    *SHAPES["received"].literals,
    *SHAPES["finished"].literals,
    *BATCH_MARKERS,
)
# what a line must hold for the per-line reader to give it more than its plain engine_lines row
TRIGGERS = tuple(sorted({*READ_MARKERS, *(lit for shape in SHAPES.values() for lit in shape.literals)}))
# the shapes the bulk readers type, in the table's order
BULK_SHAPES = tuple(name for name, shape in SHAPES.items() if shape.bulk)


def re_escape(s: str) -> str:
    """A literal as RE2 (and Python) reads it."""
    return "".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in s)


def line_pattern(shape: str) -> bytes:
    """A shape's bulk pattern behind the record prefix or none, on a whole line of bytes (Python's re, with
    re.M over a chunk of lines): groups 1-3 the prefix's ts, ms and rank, then the bulk pattern's."""
    bulk = SHAPES[shape].bulk
    assert bulk is not None and bulk.startswith("^"), shape
    return ("^(?:" + PREFIX_HEAD.removeprefix("^") + ")?" + bulk[1:]).encode()


def _sql(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# the patterns as SQL macros (made on every connection with the rules' MACROS): the bulk reader's SQL
# reaches them by name, a constant its regexes compile once
MACROS = {
    "sglang_re_prefix()": _sql(PREFIX_HEAD),
    "sglang_re_triggers()": _sql("|".join(re_escape(t) for t in TRIGGERS)),
    "sglang_re_start()": _sql(BULK_START),
    **{f"sglang_re_{name}()": _sql(SHAPES[name].bulk or "") for name in BULK_SHAPES},
    **{f"sglang_re_{name}()": _sql(bulk_duration(name)) for name in DURATIONS},
}

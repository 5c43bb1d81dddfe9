"""The row builders of SGLang's line shapes (forensics.engines.sglang.shapes SHAPES): how a matched
message becomes engine_requests, node_config and batch_stats rows, and its kind in engine_lines; the
durations of a Req Time Stats line in Python and in RE2 side by side."""

from __future__ import annotations

import re
from collections.abc import Callable

from forensics.engines import integrity
from forensics.engines.facts import EngineRows
from forensics.engines.sglang.rows import (
    Row,
    batch_row,
    config,
    dict_fields,
    finished,
    num,
    received,
    request,
    server_args,
    to_int,
    unix,
)
from forensics.engines.sglang.rules import BINDING_PRIORITY, CONTEXT_LEN, pool_kind
from forensics.engines.sglang_reprs import int_list_len, py_value, read_fields

# RE2: a number
BULK_NUM = r"[0-9]+(?:\.[0-9]+)?"

# a builder adds the rows of a matched message and returns the line's kind in engine_lines; ValueError
# (or OverflowError) rejects the line
Builder = Callable[[re.Match[str], str, Row, EngineRows, "str | None"], str]

# --log-requests text lines: what follows `obj=` is read by read_fields; only the keys of meta_info read
# are evaluated (the rest may hold values that are no Python literal: nan)
FINISH_KEYS = ("id", "finish_reason", "prompt_tokens", "completion_tokens")


def request_log(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    """A --log-requests text line: Receive gives 'received' rows, Finish a 'finished' row. Only the
    top-level fields of obj count, so a prompt that quotes `rid=` or `bootstrap_room=` changes nothing."""
    obj, close = read_fields(msg, m.end())
    if not msg.startswith(")", close):
        raise ValueError(f"obj={m['cls']}( is not closed")
    rest: dict[str, str] = {}
    tail = close + 1
    if msg.startswith(", ", tail):
        rest, tail = read_fields(msg, tail + 2)
    if tail != len(msg):
        raise ValueError("text after the logged request")
    rid = py_value(obj["rid"]) if "rid" in obj else None
    room = py_value(obj.get("bootstrap_room", "None"))
    if m["event"] == "Receive":
        n = int_list_len(obj["input_ids"]) if "input_ids" in obj else None
        rows.requests.extend(received(base, rid, room, n))
        return "received"
    if "out" not in rest:
        raise ValueError("a Finish line without out=")
    meta_text = dict_fields(rest["out"]).get("meta_info")
    if meta_text is None:
        raise ValueError("out has no meta_info")
    meta = {k: py_value(v) for k, v in dict_fields(meta_text).items() if k in FINISH_KEYS}
    rows.requests.append(finished(base, rid if isinstance(rid, str) else None, room, meta))
    return "finished"


def batch(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    rows.batches.append(batch_row(m, base))
    return f"{m['kind'].lower()}_batch"


def overlength(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    rid = m.group("rid") or m.group("rid2")
    rows.requests.append(
        request(base, rid, None, "overlength", input_len=num(m.group("L")), max_input_len=num(m.group("M")))
    )
    return "overlength"


# one duration in the durations after a Req Time Stats line: `name=12.34ms` or, for 0.5.11's totals and
# sub-phases, `name(12.34ms)`; a value without `ms` is in seconds
DURATION = re.compile(r"(?<![\w.#])(?P<name>[a-z_]+)(?:=|\()(?P<v>-?\d+(?:\.\d+)?)(?P<ms>ms)?(?![\w.])")
# ... and when the request entered the scheduler (Unix seconds, the node's clock): nothing of it is in
# the node's KV pool before then. 0.5.23 calls it entry_time; 0.5.11's `start=` is on the monotonic
# clock and is not read
START_NAMES = ("start_time", "entry_time")
START_TIME = re.compile(rf"(?<![\w.])(?:{'|'.join(START_NAMES)})=(?P<s>\d+(?:\.\d+)?)")
# below this a start_time is a monotonic clock reading (0.5.4 prints time.perf_counter()), not a time
MIN_WALLCLOCK_S = 1e9
# the durations the time_stats row reads (the bulk reader types each: bulk_duration)
DURATIONS = (
    "prealloc_duration",
    "prealloc_queue_duration",
    "bootstrap_duration",
    "alloc_wait_duration",
    "transfer_duration",
    "queue_duration",
    "bootstrap_queue_duration",
    "forward_duration",
)
# the durations of the time_stats bulk pattern's tail: `name=number[ms]` pairs after `: ` or `, `
BULK_DURATION_PAIR = rf"(?:: |, )[a-z_]+={BULK_NUM}(?:ms)?"


def bulk_duration(name: str) -> str:
    """RE2 on the bulk tail: a duration's value (group 1) and unit (group 2), its first pair as DURATION's
    setdefault takes it."""
    return rf"[:,] {name}=({BULK_NUM})(ms)?(?:,|$)"


BULK_START = rf"[:,] (?:{'|'.join(START_NAMES)})=({BULK_NUM})"


def time_stats(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    """A Req Time Stats line: the request's lengths and, by its type, how long each stage took."""
    dur: dict[str, float] = {}
    for d in DURATION.finditer(msg, m.end()):
        dur.setdefault(d["name"], float(d["v"]) / (1000 if d["ms"] else 1))
    kind = m.group("type")
    prealloc = bootstrap = transfer = None
    if kind == "decode":
        prealloc = dur.get("prealloc_duration", dur.get("prealloc_queue_duration"))
        if prealloc is None and "bootstrap_duration" in dur and "alloc_wait_duration" in dur:
            # 0.5.23 prints the two sub-phases instead of the whole prealloc wait
            prealloc = dur["bootstrap_duration"] + dur["alloc_wait_duration"]
        transfer = dur.get("transfer_duration")
    elif kind == "prefill":
        # the whole bootstrap-queue wait (0.4.9-0.5.4 bootstrap_duration, 0.5.11+ bootstrap_queue_duration);
        # 0.5.23 may print only the handshake part, as bootstrap_duration
        bootstrap = dur.get("bootstrap_queue_duration", dur.get("bootstrap_duration"))
    st = START_TIME.search(msg, m.end())
    room = m.group("room")
    row = request(
        base,
        m.group("rid").strip("'\""),
        None if room in (None, "None") else num(room),
        "time_stats",
        input_len=num(m.group("inp")),
        output_len=num(m.group("out")),
        detail=kind,
        forward_s=dur.get("forward_duration"),
        start_time=unix(st["s"]) if st and float(st["s"]) >= MIN_WALLCLOCK_S else None,
        prealloc_s=prealloc,
        transfer_s=transfer,
        queue_s=dur.get("queue_duration"),
        bootstrap_s=bootstrap,
    )
    rows.requests.append(row)
    return "time_stats"


def kvpoll_row(base: Row, rid: str | None, t: re.Match[str]) -> Row:
    return request(base, rid, num(t["room"]), "kvpoll_timeout", detail=t["state"], elapsed_s=float(t["s"]))


def transfer_failed(timeout: re.Pattern[str]) -> Builder:
    """The builder of a failed transfer, whose reason may be the `timeout` shape's line: the line says
    both that it failed and why."""

    def build(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
        rid, reason = m.group("rid") or m.group("rid2"), m.group("reason") or ""
        kind = f"{m.group('side').lower()}_{m.group('stage')}_failed"
        room = num(m.group("room")) if m.group("room") else None  # a line naming the rid alone has none
        rows.requests.append(request(base, rid, room, kind, detail=reason[:500]))
        if t := timeout.search(reason):
            rows.requests.append(kvpoll_row(base, rid, t))
        return "transfer_failed"

    return build


def kvpoll_timeout(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    rows.requests.append(kvpoll_row(base, None, m))
    return "kvpoll_timeout"


def context_corruption(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    detail = f"received metadata from bootstrap_room={m['actual']}, metadata buffer index {m['idx']}"
    rows.requests.append(request(base, m["rid"], num(m["room"]), "context_corruption", detail=detail))
    return "context_corruption"


def deferred_release(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    rows.requests.append(request(base, None, num(m["room"]), "deferred_release_timeout", elapsed_s=float(m["s"])))
    return "deferred_release_timeout"


def checksum(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    detail = f"expected={m['expected']} got={m['got']}" if m["expected"] else "on a peer rank"
    room = num(m["room"])
    rows.requests.append(request(base, m["rid"], room, "kv_checksum_mismatch", detail=detail))
    row = integrity.event(base, "checksum_mismatch", msg, reason=detail, room=room, request_id=m["rid"])
    rows.integrity.append(row)
    return "kv_checksum_mismatch"


def canary(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    """A KV canary violation: the slot, position and tokens its first line names (the lines after it,
    unprefixed, repeat them)."""
    rows.integrity.append(integrity.canary_row(m, msg, base))
    return "kv_canary_violation"


def mooncake_failure(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    """A Mooncake transfer-engine slice failure in the server log (glog's prefix, not SGLang's: no time
    is read from it)."""
    rows.integrity.append(integrity.mooncake_row(m, msg, base))
    return "mooncake_failure"


def kind(name: str) -> Builder:
    """A line read for its kind alone: no rows."""
    return lambda m, msg, base, rows, rank: name


def server_args_line(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    a = server_args(m.group("body"))
    rows.config.append(
        config(
            base,
            rank,
            role=a.get("disaggregation_mode") or "null",
            page_size=to_int(a.get("page_size")),
            context_len=to_int(a.get("context_length")),
            tp_size=to_int(a.get("tp_size")),
            model_path=a.get("model_path"),
        )
    )
    return "server_args"


# the three sources of the pool rule (forensics.engines.sglang.rules.POOL_SOURCES), each as the line gives
# it; node_config.pool_tokens is the rule's pool (forensics.ingest.engine.store)
def swa_pools(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    rows.config.append(config(base, rank, full_layer_tokens=num(m[1])))
    return "swa_pools"


def kv_pool(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    # a sliding-window, state or draft pool, or a virtual pool's upper bound, is no allocated_tokens
    if m.group("what") != "is allocated" or pool_kind(m.group("name"))[1] != BINDING_PRIORITY:
        return "kv_pool_not_binding"  # read, and known not to be the pool (forensics.audit weighs it)
    rows.config.append(config(base, rank, allocated_tokens=num(m.group("n"))))
    return "kv_pool"


def max_total(m: re.Match[str], msg: str, base: Row, rows: EngineRows, rank: str | None) -> str:
    ctx = CONTEXT_LEN.search(msg)
    rows.config.append(config(base, rank, context_len=num(ctx[1]) if ctx else None, max_total_num_tokens=num(m[1])))
    return "max_total"

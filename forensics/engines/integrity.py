"""The engines' own integrity lines: each a row of integrity_events (node, time, kind, the room or request,
and the slot, position or blocks where the line names them), read where the engine's line reader reads
its log. SGLang's (the KV canary, the transfer checksum) are shapes of its table
(forensics.engines.sglang.shapes); the lines of the transfer libraries an engine loads (NIXL in vLLM,
Mooncake's transfer engine in SGLang and vLLM) are described here once, in INTEGRITY, and read by
`parse_message` from any engine's text log.

Sources (each pattern checked against the line's source; fixtures in tests/data/integrity_lines/):
- `kv_canary violation: launch_tag=T fail_reason=R[+R..] slot_idx=S position=P stored_token=X
  expected_token=Y stored_chain_hash=0x.. expected_aux=0x..`: sglang/srt/kv_canary/runner/
  violation_reporter.py `_format_violation` (0.5.23), the first line of a multi-line WARNING (--kv-canary
  log) or of the RuntimeError (--kv-canary raise); the labels are FailReason's names without `_mismatch`;
- `KV checksum mismatch [on a peer rank ]req=.. bootstrap_room=..[ expected=0x.. got=0x..]`:
  sglang/srt/disaggregation/decode.py (0.5.23, --disaggregation-enable-kv-checksum, the Adler-32 of
  disaggregation/checksum.py, PR #39500): decode aborts the request (HTTP 500) before it emits a token;
- `NIXL transfer failure: <failure_type>[. <msg>] | Context: {..}`: vllm/distributed/kv_transfer/
  kv_connector/v1/nixl_connector.py, later nixl/base_worker.py `_log_failure` (PR #32031), the context a
  Python dict repr (failure_type, request_id, engine_id, remote_engine_id, remote_request_id, remote_host,
  remote_port, num_local_blocks, num_remote_blocks, local_block_ids_sample, extra context);
- `Releasing expired KV blocks for request <id> which were retrieved by N decode worker(s) within S
  seconds.` (nixl_connector.py, before PR #55854) or `... by N remote worker(s) before lease expired.`
  (nixl/base_worker.py): the prefill side freed a request's blocks when its lease ran out;
- `Potentially invalid KV blocks for unrecognized request <id> were retrieved by a decode worker. They
  may have expired.`: the prefill side heard of a read of blocks it no longer held (logged, not failed);
- `Worker: Process failed for slice (opcode: N, source_addr: A, length: L, dest_addr: D, local_nic: ..,
  peer_nic: host:port@nic, dest_rkey: .., retry_cnt: ..[, max_retry_cnt: ..]): <ibv status>`:
  kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/worker_pool.cpp, behind
  glog's own prefix (`E0603 20:16:59.104586 27322 worker_pool.cpp:271] `).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forensics.engines.facts import EngineRows

Row = dict[str, Any]
# the columns of an integrity_events row a line may leave out (NULL)
OPTIONAL = (
    "reason",
    "room",
    "request_id",
    "remote_request_id",
    "slot",
    "position",
    "stored_token",
    "expected_token",
    "block_ids",
    "num_blocks",
    "address",
)
# the kinds, what each proves (the report's and the watcher's words: docs/evidence-bundle.md)
KINDS = {
    "canary_violation": "the KV canary found a slot whose stamp is not what its holder wrote",
    "checksum_mismatch": "the KV that landed in a room's pages is not the KV prefill sent",
    "nixl_failure": "a NIXL KV transfer failed",
    "nixl_expired": (
        "prefill freed a request's KV blocks when their lease ran out, or heard of a read of blocks it no longer held"
    ),
    "mooncake_failure": "a Mooncake transfer-engine slice failed",
}
# the canary's fail reasons that a read checks (verify_*; `chain_hash`, `position`, `real_kv_hash` in the
# releases that printed the bare names): a slot that fails one held, at that read, KV other than what its
# holder wrote. write_* reasons check the canary's own stamping, not a read; a sweep (launch tags SWEEP_*)
# checks the slots the radix cache keeps, which no request need be reading.
READ_REASONS = (
    "verify_chain_hash",
    "verify_position",
    "verify_real_kv_hash",
    "verify_token",
    "chain_hash",
    "position",
    "real_kv_hash",
)


def event(base: Row, kind: str, msg: str, **cols: Any) -> Row:
    """An integrity_events row: the line's node, file, line and time (base), its kind, the fields it names,
    and its text (at most 4000 characters)."""
    assert kind in KINDS, kind
    return base | dict.fromkeys(OPTIONAL) | {"kind": kind, "message": msg[:4000]} | cols


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    n = int(v)
    if not -(1 << 63) <= n < 1 << 63:
        raise ValueError(f"number out of range: {v[:40]}")
    return n


# --- SGLang's canary (a shape of forensics.engines.sglang.shapes; its builder is there) ---
CANARY = re.compile(
    r"kv_canary violation: launch_tag=(?P<tag>\S+) fail_reason=(?P<reason>\S+) slot_idx=(?P<slot>-?\d+) "
    r"position=(?P<pos>-?\d+) stored_token=(?P<stored>-?\d+) expected_token=(?P<expected>-?\d+)"
)


def canary_row(m: re.Match[str], msg: str, base: Row) -> Row:
    return event(
        base,
        "canary_violation",
        msg,
        reason=f"{m['reason']} (launch_tag={m['tag']})",
        slot=_int(m["slot"]),
        position=_int(m["pos"]),
        stored_token=_int(m["stored"]),
        expected_token=_int(m["expected"]),
    )


# READ_REASONS in SQL, made on every connection with SGLang's macros (forensics.engines.sglang MACROS):
# whether a canary row's reason names a check made on a forward's read, as is_read_violation decides
_REASONS_SQL = ", ".join(f"'{r}'" for r in READ_REASONS)
# vLLM's ids of a request (the NIXL lines' request_id and remote_request_id): the engine's id is the API
# id and `-` with 8 hex characters (vllm/v1/engine/input_processor.py assign_request_id, 0.12 on; the API id
# itself before, or with VLLM_DISABLE_REQUEST_ID_RANDOMIZATION); the API id is `cmpl-<base>-<i>` (a
# prompt of a completion) or `chatcmpl-<base>` (openai/completion/serving.py, chat_completion/serving.py),
# its base the client's X-Request-Id (serve/engine/serving.py _base_request_id) or a uuid. The keys a
# gateway record's request_id may equal: the id, the id without that suffix, and either's base.
_KEYS_SQL = (
    "list_filter(list_distinct(flatten(list_transform([id, regexp_replace(id, '-[0-9a-f]{8}$', '')], "
    "lambda x: [x, regexp_extract(x, '^cmpl-(.+)-[0-9]+$', 1), regexp_extract(x, '^chatcmpl-(.+)$', 1)]))), "
    "lambda k: k <> '')"
)
MACROS = {
    "canary_read_violation(reason)": f"reason NOT LIKE '%launch_tag=SWEEP\\_%' ESCAPE '\\' "
    f"AND list_has_any(string_split(split_part(reason, ' ', 1), '+'), [{_REASONS_SQL}])",
    "vllm_request_keys(id)": f"CASE WHEN id IS NULL THEN [] ELSE {_KEYS_SQL} END",
}


def is_read_violation(reason: str) -> bool:
    """Whether a canary row's reason names a check made on a forward's read (READ_REASONS, not a sweep)."""
    return "launch_tag=SWEEP_" not in reason and any(r in READ_REASONS for r in reason.split(" ", 1)[0].split("+"))


# --- the transfer libraries' lines ---
NIXL_FAILURE = re.compile(r"NIXL transfer failure: (?P<ftype>.*?) \| Context: (?P<ctx>\{.*\})\s*$")
NIXL_EXPIRED = re.compile(
    r"Releasing expired KV blocks for request (?P<rid>\S+) which were retrieved by (?P<n>\d+) "
    r"(?:decode|remote) worker\(s\) (?:within (?P<s>\d+) seconds|before lease expired)\."
)
NIXL_STALE_READ = re.compile(
    r"Potentially invalid KV blocks for unrecognized request (?P<rid>\S+) were retrieved by a decode worker\."
)
MOONCAKE_FAILURE = re.compile(
    r"Worker: Process failed for slice \(opcode: (?P<op>\d+), source_addr: (?P<src>[^,]+), length: (?P<len>\d+), "
    r"dest_addr: (?P<dst>[^,]+), local_nic: (?P<lnic>[^,]*), peer_nic: (?P<peer>[^,]*), dest_rkey: \d+, "
    r"retry_cnt: \d+(?:, max_retry_cnt: \d+)?\): (?P<status>.*)$"
)
# a context value the repr may hold that is no literal (an exception's repr, an object): read by key
_CTX_STR = re.compile(r"'(?P<k>request_id|remote_request_id|remote_host)': '(?P<v>[^']*)'")


def _context(text: str) -> dict[str, Any]:
    try:
        ctx = ast.literal_eval(text)
        if isinstance(ctx, dict):
            return ctx
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    return {m["k"]: m["v"] for m in _CTX_STR.finditer(text)}


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63 else None


def nixl_failure_row(m: re.Match[str], msg: str, base: Row) -> Row:
    ctx = _context(m["ctx"])
    sample = ctx.get("local_block_ids_sample")
    blocks = [b for b in sample if _opt_int(b) is not None] if isinstance(sample, list) else None
    host, port = ctx.get("remote_host"), ctx.get("remote_port")
    rid, remote = ctx.get("request_id"), ctx.get("remote_request_id")
    return event(
        base,
        "nixl_failure",
        msg,
        reason=m["ftype"],
        request_id=rid if isinstance(rid, str) else None,
        remote_request_id=remote if isinstance(remote, str) else None,
        block_ids=blocks,
        num_blocks=_opt_int(ctx.get("num_local_blocks")),
        address=f"{host}:{port}" if isinstance(host, str) else None,
    )


def nixl_expired_row(m: re.Match[str], msg: str, base: Row) -> Row:
    within = f" within {m['s']} s" if m["s"] else " before the lease expired"
    return event(base, "nixl_expired", msg, reason=f"released; read by {m['n']} worker(s){within}", request_id=m["rid"])


def nixl_stale_read_row(m: re.Match[str], msg: str, base: Row) -> Row:
    return event(base, "nixl_expired", msg, reason="read by a decode worker after release", request_id=m["rid"])


def mooncake_row(m: re.Match[str], msg: str, base: Row) -> Row:
    return event(
        base,
        "mooncake_failure",
        msg,
        reason=m["status"].strip(),
        address=f"source_addr={m['src']} dest_addr={m['dst']} peer_nic={m['peer']} local_nic={m['lnic']}",
    )


@dataclass(frozen=True)
class IntegrityShape:
    """A transfer library's integrity line: its pattern (searched in the message), the literal every line
    it matches holds, and its integrity_events row."""

    pattern: re.Pattern[str]
    literal: str
    build: Callable[[re.Match[str], str, Row], Row]


INTEGRITY: dict[str, IntegrityShape] = {
    "nixl_failure": IntegrityShape(NIXL_FAILURE, "NIXL transfer failure: ", nixl_failure_row),
    "nixl_expired": IntegrityShape(NIXL_EXPIRED, "Releasing expired KV blocks for request ", nixl_expired_row),
    "nixl_stale_read": IntegrityShape(
        NIXL_STALE_READ, "Potentially invalid KV blocks for unrecognized request ", nixl_stale_read_row
    ),
    "mooncake_failure": IntegrityShape(MOONCAKE_FAILURE, "Worker: Process failed for slice (", mooncake_row),
}
LITERALS = tuple(s.literal for s in INTEGRITY.values())


def parse_message(msg: str, base: Row, rows: EngineRows) -> str | None:
    """The integrity row of a message of any engine's text log, added to rows; its shape's name, or None
    when the message is none of INTEGRITY's. ValueError: a field does not fit."""
    for name, shape in INTEGRITY.items():
        if shape.literal in msg and (m := shape.pattern.search(msg)):
            rows.integrity.append(shape.build(m, msg, base))
            return name
    return None


def read_text_line(raw: bytes, node: str, file_id: int, lineno: int, rows: EngineRows) -> bool:
    """One line of a text log of an engine without a line reader of its own (vLLM, where NIXL and
    Mooncake write): its integrity row, if it is one of INTEGRITY's. No time is read: vLLM's prefix
    (`LEVEL MM-DD HH:MM:SS`) and glog's (`E0603 20:16:59.104586`) print no year, and a time is never
    guessed (the line's text keeps its stamp). False when the line is rejected (reason in rows.rejected)."""
    if not any(lit.encode() in raw for lit in LITERALS):
        return True
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        parse_message(text, {"node": node, "file_id": file_id, "line": lineno, "ts": None}, rows)
    except ValueError as err:
        rows.rejected.append((file_id, lineno, f"integrity line with unusable fields ({err}): {text[:120]}"))
        return False
    return True

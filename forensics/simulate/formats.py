"""The simulated gateway log in the formats real tools write (docs/gateway-formats.md), instead of the spec's.

Each writer writes what its tool would have written for the same client requests, and nothing it could
not know: none logs bootstrap_room, prefill_node or decode_node. Field sets, names, order and value shapes
follow the sources cited at each writer (the code index's copies; check them against the version you
target). The join key each format leaves for the analyzer:

- litellm_spendlogs, litellm_payload: the upstream response id (SGLang's decode rid) of a success; a
  failure has no response, so LiteLLM records its own litellm_call_id (a UUID that names no engine record);
- smg, envoy: the spec request_id, which the gateway forwards as x-request-id; the engines' request logs
  then carry it under "headers" (see engine_headers);
- otlp: the trace id, which the SGLang root spans (rid, bootstrap_room as hex) share.

A request whose client went away (spec status 499) is logged as each tool logs it: LiteLLM a failure
with error_code "499"; SMG only its "started" line (the response future is dropped); Envoy response_code
0 with flag DC; the OTLP gateway span no status code. LiteLLM logs no tokens for a failure.

truth/gateway_ids.csv maps each spec request_id to the id the format logs, where the two differ (for
otlp: the gateway span's id, the fallback request id of a span without one, and the trace id).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from forensics.simulate.cluster import Node
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request
from forensics.simulate.texts import Text

FORWARDED = ("smg", "envoy", "kvf_noroom")  # formats whose join is the x-request-id the gateway forwards
ROUTE = "/v1/chat/completions"
API_BASE = "http://smg-router.inference.svc.cluster.local:30000/v1"  # LiteLLM's upstream: the SGLang router
UPSTREAM_HOST = "10.20.0.40:30000"  # Envoy's upstream: the same router, in front of the PD pair
IDS_FILE = "gateway_ids.csv"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def log_ts(us: int, ms: bool) -> str:
    """UTC 'YYYY-MM-DD HH:MM:SS[.mmm]' (ms truncated), as forensics.simulate.writer.log_ts (which imports
    this module, so it cannot be imported here)."""
    sec, frac = divmod(us, 1_000_000)
    text = (_EPOCH + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{frac // 1000:03d}" if ms else text


def iso_ms_z(us: int) -> str:
    """RFC 3339 UTC with ms, as the spec's gateway ts (forensics.simulate.writer.iso_ms_z)."""
    return log_ts(us, True).replace(" ", "T") + "Z"


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@dataclass
class Rendered:
    files: dict[str, bytes] = field(default_factory=dict)  # name under gateway/ -> bytes
    ids: list[tuple[str, ...]] | None = None  # truth/gateway_ids.csv rows, header first (None: not written)


def _digest(cfg: SimConfig, *parts: str) -> bytes:
    return hashlib.sha256("\x1f".join((str(cfg.seed), *parts)).encode()).digest()


def _uuid4(cfg: SimConfig, *parts: str) -> str:
    return str(uuid.UUID(bytes=_digest(cfg, *parts)[:16], version=4))


def _hex(cfg: SimConfig, n: int, *parts: str) -> str:
    return _digest(cfg, *parts).hex()[:n]


def _ok(r: Request) -> bool:
    return 200 <= r.status < 300


def _by_end(reqs: Iterable[Request]) -> list[Request]:
    """Loggers write when a request completes: the order of a log file."""
    return sorted(reqs, key=lambda r: (r.t_end, r.request_id))


def _csv_bytes(rows: list[tuple[str, ...]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def engine_records(nodes: dict[str, Node]) -> dict[int, list[tuple[str, str, int, dict[str, Any]]]]:
    """room -> the engines' request-log records of it: (node, role, node-clock µs, record)."""
    out: dict[int, list[tuple[str, str, int, dict[str, Any]]]] = {}
    for name in sorted(nodes):
        node = nodes[name]
        for ts, j in node.jsonl:
            out.setdefault(int(j["room"]), []).append((name, node.spec.role, ts, j))  # type: ignore[call-overload]
    return out


def engine_headers(cfg: SimConfig, reqs: list[Request]) -> dict[int, dict[str, str]] | None:
    """room -> the headers the engines' --log-requests JSON records hold, for formats joined by a
    forwarded id. SGLang logs the whitelisted request headers (x-smg-routing-key, plus those named by
    SGLANG_LOG_REQUEST_HEADERS, here x-request-id) as `"headers": {name: value}` between "obj" and "out"
    (python/sglang/srt/utils/request_logger.py, _extract_whitelisted_headers and log_finished_request);
    SMG forwards a client's x-request-id (sgl-model-gateway/src/routers/header_utils.rs), Envoy its own."""
    if cfg.gateway_format not in FORWARDED:
        return None
    return {r.room: {"x-request-id": r.request_id} for r in reqs}


def gateway_toml(cfg: SimConfig) -> str:
    """bundle.toml's [gateway] for a format whose tenant only the operator's own field names."""
    if cfg.gateway_format == "envoy":
        return '\n[gateway]\ntenant = "x-tenant-id"\n'
    return ""


# --- LiteLLM ------------------------------------------------------------------------------------------
# Columns of LiteLLM_SpendLogs in the order of BerriAI/litellm schema.prisma (model LiteLLM_SpendLogs).
# A database created by the migrations (litellm-proxy-extras .../migrations: 20250326162113_baseline, then
# ALTER TABLE ... ADD COLUMN for session_id, status, organization_id, request_duration_ms, ...) holds the
# later columns at the end instead; `\copy` writes the physical order, so a reader must go by the header.
SPENDLOGS_COLUMNS = (
    "request_id", "call_type", "api_key", "spend", "total_tokens", "prompt_tokens", "completion_tokens",
    "startTime", "endTime", "request_duration_ms", "completionStartTime", "model", "model_id", "model_group",
    "custom_llm_provider", "api_base", "user", "metadata", "cache_hit", "cache_key", "request_tags", "team_id",
    "organization_id", "end_user", "requester_ip_address", "messages", "response", "session_id", "status",
    "mcp_namespaced_tool_name", "agent_id", "proxy_server_request",
)  # fmt: skip

# error_information of a failure (StandardLoggingPayloadErrorInformation, litellm/types/utils.py; filled by
# litellm_logging.py get_error_information from the exception's status_code; a client disconnect is
# _CLIENT_DISCONNECTED_ERROR_INFORMATION, error_code "499", in newer proxies)
_ERRORS = {
    400: ("BadRequestError", "litellm.BadRequestError: OpenAIException - The input is longer than the context length."),
    499: ("ClientDisconnected", "Client disconnected the request"),
    503: ("ServiceUnavailableError", "litellm.ServiceUnavailableError: OpenAIException - Service Unavailable"),
}  # fmt: skip


def litellm_id(cfg: SimConfig, r: Request) -> str:
    """The id LiteLLM logs: the response's `id` (SGLang's decode rid) else its litellm_call_id
    (litellm_logging.py: `response_obj.get("id", kwargs.get("litellm_call_id"))`; spend_tracking_utils.py
    get_spend_logs_id)."""
    return r.rid_d if _ok(r) else _uuid4(cfg, "litellm_call_id", r.request_id)


def _api_key_hash(r: Request) -> str:
    """hash_token: sha256 hex of the virtual key (here: of the spec's token id)."""
    return hashlib.sha256(r.token.encode()).hexdigest()


def _model_id(cfg: SimConfig) -> str:
    return hashlib.sha256(json.dumps({"model": f"openai/{cfg.model_path}", "api_base": API_BASE}).encode()).hexdigest()


def _ua_tags(ua: str) -> list[str]:
    """request_tags LiteLLM adds from the user agent (litellm_logging.py _get_user_agent_tags)."""
    tags = ["User-Agent: " + ua.split("/")[0]] if "/" in ua else []
    return [*tags, "User-Agent: " + ua]


def _usage(r: Request) -> dict[str, int]:
    """A failure has no response and so no usage: LiteLLM logs zero tokens for it."""
    p, c = (r.L, r.completion) if _ok(r) else (0, 0)
    return {"completion_tokens": c, "prompt_tokens": p, "total_tokens": p + c}


def _error_information(r: Request) -> dict[str, str]:
    if _ok(r):
        return {"error_code": "", "error_class": "", "llm_provider": "", "traceback": "", "error_message": ""}
    cls, msg = _ERRORS.get(r.status, ("APIError", f"litellm.APIError: OpenAIException - Error code: {r.status}"))
    if r.status == 499:
        return {"error_code": str(r.status), "error_message": msg, "error_class": cls}
    return {"error_code": str(r.status), "error_class": cls, "llm_provider": "openai", "traceback": "",
            "error_message": msg}  # fmt: skip


def _jsonb(v: Any) -> str:
    """A value as Postgres prints jsonb: object keys shortest first, then bytewise; ", " and ": "
    between items; strings with only ", \\ and control characters escaped (escape_json)."""
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_jsonb(x)}" for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_jsonb(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def _pg_csv(v: object) -> str:
    """One field as psql `\\copy ... CSV` writes it: NULL unquoted empty, an empty string "", a value
    with the delimiter, a quote, CR or LF quoted with quotes doubled (copyto.c CopyAttributeOutCSV)."""
    if v is None:
        return ""
    s = v if isinstance(v, str) else str(v)
    if s == "" or any(c in s for c in ',"\r\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def _pg_ts(us: int) -> str:
    """A timestamp(3) without time zone as Postgres prints it: rounded to ms, trailing zeros dropped."""
    ms_total = (us + 500) // 1000
    base = log_ts(ms_total * 1000, False)
    frac = f"{ms_total % 1000:03d}".rstrip("0")
    return f"{base}.{frac}" if frac else base


def _text(r: Request) -> Text | None:
    t = r.extra.get("text")
    return t if isinstance(t, Text) else None


def _messages(r: Request) -> list[dict[str, str]]:
    """The request's messages as LiteLLM logs them; without simulated texts, as turn_off_message_logging
    leaves them."""
    t = _text(r)
    if t is None:
        return [{"role": "user", "content": "redacted-by-litellm"}]
    return [{"role": "system", "content": t.system}, {"role": "user", "content": t.user}]


def _response_text(r: Request) -> str:
    t = _text(r)
    return "redacted-by-litellm" if t is None else t.response


def _spend_response(cfg: SimConfig, r: Request) -> dict[str, Any]:
    """The response column: json.dumps of the payload's response (a ModelResponse; {} for a failure)."""
    if not _ok(r):
        return {}
    usage = _usage(r)
    return {"id": r.rid_d, "created": r.t_end // 1_000_000, "model": cfg.model_path, "object": "chat.completion",
            "choices": [{"finish_reason": "stop", "index": 0,
                         "message": {"content": _response_text(r), "role": "assistant"}}], "usage": usage}  # fmt: skip


def _spendlogs_row(cfg: SimConfig, r: Request) -> list[object]:
    """One LiteLLM_SpendLogs row as get_logging_payload (litellm/proxy/spend_tracking/
    spend_tracking_utils.py) makes it: metadata is SpendLogsMetadata (litellm/proxy/_types.py), which holds
    no user agent; the agent reaches the row only through request_tags."""
    ok = _ok(r)
    usage = _usage(r)
    metadata: dict[str, Any] = {
        "user_api_key": _api_key_hash(r),
        "user_api_key_alias": r.token,
        "user_api_key_team_id": r.account,
        "user_api_key_org_id": None,
        "user_api_key_user_id": None,
        "user_api_key_team_alias": None,
        "spend_logs_metadata": None,
        "requester_ip_address": r.ip,
        "applied_guardrails": None,
        "batch_models": None,
        "mcp_tool_call_metadata": None,
        "vector_store_request_metadata": None,
        "guardrail_information": None,
        "usage_object": usage,
        "model_map_information": {"model_map_key": cfg.model_path, "model_map_value": None},
        "cold_storage_object_key": None,
        "litellm_overhead_time_ms": None,
        "cost_breakdown": None,
        "additional_usage_values": {},
        "status": "success" if ok else "failure",
    }
    if not ok:
        metadata["error_information"] = _error_information(r)
    return [
        litellm_id(cfg, r),
        "acompletion",
        _api_key_hash(r),
        0,  # spend: a self-hosted model has no price in LiteLLM's cost map
        usage["total_tokens"],
        usage["prompt_tokens"],
        usage["completion_tokens"],
        _pg_ts(r.t0),
        _pg_ts(r.t_end),
        round((r.t_end - r.t0) / 1000),
        _pg_ts(r.t_end),  # completionStartTime: the end time unless streamed (completion_start_time default)
        cfg.model_path,
        _model_id(cfg),
        cfg.model,
        "openai",
        API_BASE,
        "",  # user: user_api_key_user_id or ""
        _jsonb(metadata),
        "False",
        "Cache OFF",
        _jsonb(_ua_tags(r.ua)),
        r.account,
        "",  # organization_id: user_api_key_org_id or ""
        "",  # end_user
        r.ip,
        # messages, response, proxy_server_request: only with store_prompts_in_spend_logs (with texts:
        # json.dumps of the payload's messages and response, stored as jsonb)
        _jsonb(_messages(r)) if _text(r) else "{}",
        _jsonb(_spend_response(cfg, r)) if _text(r) else "{}",
        _uuid4(cfg, "litellm_trace_id", r.request_id),  # session_id: the payload's trace_id
        "success" if ok else "failure",
        None,
        None,
        "{}",
    ]


def render_spendlogs(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    lines = [",".join(SPENDLOGS_COLUMNS)]
    for r in _by_end(reqs):
        lines.append(",".join(_pg_csv(v) for v in _spendlogs_row(cfg, r)))
    return Rendered({"spend_logs.csv": ("\n".join(lines) + "\n").encode()}, _litellm_ids(cfg, reqs))


def _litellm_ids(cfg: SimConfig, reqs: list[Request]) -> list[tuple[str, ...]]:
    rows = sorted((r.request_id, litellm_id(cfg, r)) for r in reqs)
    return [("spec_request_id", "format_request_id"), *rows]


def _payload(cfg: SimConfig, r: Request) -> dict[str, Any]:
    """One StandardLoggingPayload (litellm/types/utils.py) in the key order of
    get_standard_logging_object_payload (litellm/litellm_core_utils/litellm_logging.py); metadata as
    get_standard_logging_metadata initialises it (StandardLoggingMetadata), requester_custom_headers as the
    enterprise hook fills it (the client's x- headers)."""
    ok = _ok(r)
    status = "success" if ok else "failure"
    usage = _usage(r)
    start, end = r.t0 / 1e6, r.t_end / 1e6
    metadata: dict[str, Any] = {
        "user_api_key_hash": _api_key_hash(r),
        "user_api_key_alias": r.token,
        "user_api_key_spend": None,
        "user_api_key_max_budget": None,
        "user_api_key_budget_reset_at": None,
        "user_api_key_team_id": r.account,
        "user_api_key_org_id": None,
        "user_api_key_project_id": None,
        "user_api_key_user_id": None,
        "user_api_key_team_alias": None,
        "user_api_key_user_email": None,
        "user_api_key_end_user_id": None,
        "user_api_key_request_route": ROUTE,
        "spend_logs_metadata": None,
        "requester_ip_address": r.ip,
        "user_agent": r.ua,
        "requester_metadata": None,
        "prompt_management_metadata": None,
        "applied_guardrails": None,
        "mcp_tool_call_metadata": None,
        "vector_store_request_metadata": None,
        "usage_object": usage,
        "requester_custom_headers": {k: v for k, v in (r.headers or {}).items() if k.startswith("x-")},
        "cold_storage_object_key": None,
        "user_api_key_auth_metadata": None,
        "team_alias": None,
        "team_id": None,
    }
    response: dict[str, Any] = {}
    if ok:
        response = {
            "id": r.rid_d,
            "created": r.t_end // 1_000_000,
            "model": cfg.model_path,
            "object": "chat.completion",
            "system_fingerprint": None,
            "choices": [
                {
                    "finish_reason": "stop",
                    "index": 0,
                    "message": {"content": _response_text(r), "role": "assistant", "tool_calls": None},
                }
            ],
            "usage": usage,
        }
    err = _error_information(r)
    return {
        "id": litellm_id(cfg, r),
        "trace_id": _uuid4(cfg, "litellm_trace_id", r.request_id),
        "call_type": "acompletion",
        "cache_hit": False,
        "stream": None,
        "status": status,
        "status_fields": {"llm_api_status": status, "guardrail_status": "not_run"},
        "custom_llm_provider": "openai",
        "saved_cache_cost": 0.0,
        "startTime": start,
        "endTime": end,
        "completionStartTime": end,
        "response_time": end - start,
        "model": cfg.model_path,
        "metadata": metadata,
        "cache_key": None,
        "response_cost": 0.0,
        "cost_breakdown": None,
        "total_tokens": usage["total_tokens"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "request_tags": _ua_tags(r.ua),
        "end_user": "",
        "api_base": API_BASE,
        "model_group": cfg.model,
        "model_id": _model_id(cfg),
        "requester_ip_address": r.ip,
        "user_agent": r.ua,
        "messages": _messages(r),
        "response": response,
        "model_parameters": {},
        "hidden_params": {
            "model_id": _model_id(cfg),
            "cache_key": None,
            "api_base": API_BASE,
            "response_cost": 0.0,
            "additional_headers": {},
            "litellm_overhead_time_ms": None,
            "batch_models": None,
            "litellm_model_name": cfg.model_path,
            "usage_object": None,
        },
        "model_map_information": {"model_map_key": cfg.model_path, "model_map_value": None},
        "error_str": None if ok else err["error_message"],
        "error_information": err,
        "response_cost_failure_debug_info": None,
        "guardrail_information": None,
        "standard_built_in_tools_params": {"web_search_options": None, "file_search": None},
    }


def render_payload(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    """JSON lines as the s3/gcs_bucket/generic_api loggers write them: json.dumps (safe_dumps) of each
    payload, default separators, non-ASCII escaped."""
    data = "".join(json.dumps(_payload(cfg, r)) + "\n" for r in _by_end(reqs))
    return Rendered({"litellm_payload.jsonl": data.encode()}, _litellm_ids(cfg, reqs))


# --- SGLang model gateway ------------------------------------------------------------------------------
# sgl-model-gateway/src/observability/logging.rs: tracing-subscriber fmt().json().flatten_event(true),
# with_file, with_line_number, ChronoUtc "%Y-%m-%d %H:%M:%S%.3f" (SGLANG_LOG_MS=1), a daily file smg.DATE.
# Keys in the order tracing-subscriber's JSON formatter writes them: timestamp, level, the event's fields,
# target, filename, line_number, span, spans; a span's fields sorted (JsonFields keeps a BTreeMap), then
# its name. middleware.rs: span http_request (method, uri, version, request_id, status_code, latency in µs,
# error, module); "started processing request" (smg::request) on the request, and on the response
# "finished processing request" (INFO), "request failed with client error" (WARN, 4xx) or "request failed
# with server error" (ERROR, 5xx). A client that disconnects drops the response future: no second line.
SMG_FILE = "src/middleware.rs"
SMG_LINES = {"smg::request": 270, "ERROR": 305, "WARN": 310, "INFO": 315}  # line_number: illustrative


def _smg_span(r: Request, done: bool) -> dict[str, object]:
    fields: dict[str, object] = {"method": "POST", "module": "smg", "request_id": r.request_id, "uri": ROUTE,
                                 "version": "HTTP/1.1"}  # fmt: skip
    if done:
        fields["latency"] = r.t_end - r.t0
        fields["status_code"] = r.status
    return {**dict(sorted(fields.items())), "name": "http_request"}


def _smg_line(
    ts: int, level: str, message: str, target: str, line: int, span: dict[str, object] | None, file: str = SMG_FILE
) -> str:
    rec: dict[str, object] = {"timestamp": log_ts(ts, True), "level": level, "message": message, "target": target,
                              "filename": file, "line_number": line}  # fmt: skip
    if span is not None:
        rec["span"] = span
        rec["spans"] = [span]
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def render_smg(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    t_boot = cfg.start_us - 600_000_000
    lines: list[tuple[int, int, str]] = [
        (t_boot, 0, _smg_line(t_boot, "INFO", "Starting router on 0.0.0.0:30000 | mode: PD disaggregated",
                              "smg::server", 118, None, "src/server.rs")),
    ]  # fmt: skip
    for r in reqs:
        start = _smg_span(r, False)
        lines.append((r.t0, r.idx * 2, _smg_line(r.t0, "INFO", "started processing request", "smg::request",
                                                 SMG_LINES["smg::request"], start)))  # fmt: skip
        if r.status == 499:  # the client went away: tower-http never sees a response
            continue
        if r.status >= 500:
            level, msg = "ERROR", "request failed with server error"
        elif r.status >= 400:
            level, msg = "WARN", "request failed with client error"
        else:
            level, msg = "INFO", "finished processing request"
        lines.append((r.t_end, r.idx * 2 + 1, _smg_line(r.t_end, level, msg, "smg::response", SMG_LINES[level],
                                                        _smg_span(r, True))))  # fmt: skip
    files: dict[str, list[str]] = {}
    for ts, _seq, text in sorted(lines):
        files.setdefault(f"smg.{log_ts(ts, False)[:10]}", []).append(text)
    return Rendered({name: ("\n".join(v) + "\n").encode() for name, v in files.items()})


# --- Envoy Gateway / Envoy AI Gateway -----------------------------------------------------------------
# Envoy Gateway's default JSON access log (gateway.envoyproxy.io "Proxy Access Logs": start_time, method,
# x-envoy-origin-path, protocol, response_code, response_flags, response_code_details, ...); the AI
# Gateway's genai_* from dynamic metadata (envoyproxy/ai-gateway site/docs/capabilities/observability/
# accesslogs.md); x-tenant-id and the internal-test header as the operator adds them (%REQ(X-TENANT-ID)%).
# Envoy prints the JSON object with its keys sorted and unavailable values as null. A client that
# disconnects before the response: response_code 0, flag DC, downstream_remote_disconnect.
ENVOY_FILE = "access.jsonl"


def _envoy_record(cfg: SimConfig, r: Request, header_names: list[str]) -> dict[str, object]:
    dc = r.status == 499
    ok = _ok(r)
    dur = (r.t_end - r.t0) // 1000
    port = 1024 + int.from_bytes(_digest(cfg, "port", r.request_id)[:2], "big") % 60000
    rec: dict[str, object] = {
        ":authority": "api.example.com",
        "bytes_received": 4 * r.L + 180,
        "bytes_sent": 0 if dc else (4 * r.completion + 420 if ok else 160),
        "connection_termination_details": None,
        "downstream_local_address": "10.10.0.21:10443",
        "downstream_remote_address": f"10.10.0.5:{port}",  # the load balancer in front
        "duration": dur,
        "genai_backend_name": "inference/sglang-pd/route/glm/rule/0/ref/0",
        "genai_model_name": cfg.model,
        "genai_model_name_override": None,
        "genai_tokens_input": r.L if ok else None,
        "genai_tokens_output": r.completion if ok else None,
        "genai_tokens_total": r.L + r.completion if ok else None,
        "method": "POST",
        "protocol": "HTTP/1.1",
        "requested_server_name": "api.example.com",
        "response_code": 0 if dc else r.status,
        "response_code_details": "downstream_remote_disconnect" if dc else "via_upstream",
        "response_flags": "DC" if dc else "-",
        "route_name": "httproute/inference/glm/rule/0/match/0/api_example_com",
        "start_time": iso_ms_z(r.t0),
        "upstream_cluster": "httproute/inference/glm/rule/0",
        "upstream_host": UPSTREAM_HOST,
        "upstream_local_address": f"10.10.0.21:{(port * 7) % 60000 + 1024}",
        "upstream_transport_failure_reason": None,
        "user-agent": r.ua,
        "x-envoy-origin-path": ROUTE,
        "x-envoy-upstream-service-time": None if dc else str(max(0, dur - 1)),
        "x-forwarded-for": r.ip,
        "x-request-id": r.request_id,
        "x-tenant-id": r.account,
    }
    for h in header_names:
        rec[h] = (r.headers or {}).get(h)
    return rec


def render_envoy(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    header_names = sorted({h for r in reqs for h in (r.headers or {})} - {"x-request-id", "x-tenant-id"})
    data = "".join(
        json.dumps(_envoy_record(cfg, r, header_names), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        + "\n"
        for r in _by_end(reqs)
    )
    return Rendered({ENVOY_FILE: data.encode()})


# --- OTLP/JSON traces -----------------------------------------------------------------------------------
# The OpenTelemetry file exporter's layout (opentelemetry.io/docs/specs/otel/protocol/file-exporter/;
# opentelemetry-proto examples/trace.json): a TracesData object per line, lowerCamelCase, hex ids, times
# and int64 values as decimal strings, SpanKind as a number. The gateway's SERVER span (HTTP and GenAI
# semantic-convention attributes, the tenant as tenant.id from x-tenant-id); the SGLang root spans as
# python/sglang/srt/observability/trace.py TraceReqContext.trace_req_start makes them ("{role} Req
# {rid[:8]}", rid, module, bootstrap_room = str(hex(room)), parented on the incoming traceparent) with the
# SpanAttributes set at finish (old gen_ai.usage.prompt_tokens/completion_tokens names).
OTLP_FILE = "traces.jsonl"
SERVER, INTERNAL = 2, 1


def _attr(key: str, v: object) -> dict[str, object]:
    if isinstance(v, bool):
        val: dict[str, object] = {"boolValue": v}
    elif isinstance(v, int):
        val = {"intValue": str(v)}
    elif isinstance(v, float):
        val = {"doubleValue": v}
    elif isinstance(v, list):
        val = {"arrayValue": {"values": [{"stringValue": str(x)} for x in v]}}
    else:
        val = {"stringValue": str(v)}
    return {"key": key, "value": val}


def otlp_ids(cfg: SimConfig, r: Request) -> tuple[str, str]:
    """(trace id, the gateway span's id)."""
    return _hex(cfg, 32, "trace", r.request_id), _hex(cfg, 16, "span", r.request_id)


def _gateway_span(cfg: SimConfig, r: Request) -> dict[str, object]:
    trace, span = otlp_ids(cfg, r)
    dc = r.status == 499
    attrs: list[dict[str, object]] = [
        _attr("http.request.method", "POST"),
        _attr("url.path", ROUTE),
        _attr("http.route", ROUTE),
        _attr("server.address", "api.example.com"),
    ]
    if not dc:
        attrs.append(_attr("http.response.status_code", r.status))
    attrs += [
        _attr("client.address", r.ip),
        _attr("user_agent.original", r.ua),
        _attr("tenant.id", r.account),
        _attr("gen_ai.operation.name", "chat"),
        _attr("gen_ai.request.model", cfg.model),
    ]
    if _ok(r):
        attrs += [_attr("gen_ai.usage.input_tokens", r.L), _attr("gen_ai.usage.output_tokens", r.completion)]
    t = _text(r)
    if t is not None:  # opt-in content (semconv v1.37+): JSON strings of instructions and messages of parts
        attrs += [
            _attr("gen_ai.system_instructions", json.dumps([{"type": "text", "content": t.system}])),
            _attr("gen_ai.input.messages",
                  json.dumps([{"role": "user", "parts": [{"type": "text", "content": t.user}]}])),
        ]  # fmt: skip
        if t.response:
            out = [{"role": "assistant", "parts": [{"type": "text", "content": t.response}], "finish_reason": "stop"}]
            attrs.append(_attr("gen_ai.output.messages", json.dumps(out)))
    for h, v in sorted((r.headers or {}).items()):
        attrs.append(_attr(f"http.request.header.{h}", [v]))
    if dc:
        attrs.append(_attr("error.type", "downstream_remote_disconnect"))
    elif r.status >= 500:
        attrs.append(_attr("error.type", str(r.status)))
    status: dict[str, object] = {"code": 2} if dc or r.status >= 500 else {}
    return {
        "traceId": trace,
        "spanId": span,
        "name": f"POST {ROUTE}",
        "kind": SERVER,
        "startTimeUnixNano": str(r.t0 * 1000),
        "endTimeUnixNano": str(r.t_end * 1000),
        "attributes": attrs,
        "status": status,
    }


def _sglang_span(cfg: SimConfig, r: Request, role: str, ts: int, rec: dict[str, Any]) -> dict[str, object]:
    trace, parent = otlp_ids(cfg, r)
    rid = str(rec["rid"])
    e2e_us = int(round(float(rec["e2e_latency"]) * 1e6))
    attrs = [_attr("rid", rid), _attr("module", "sglang::request"), _attr("bootstrap_room", str(hex(r.room)))]
    if (rec.get("finish_reason") or {}).get("type") != "abort":
        attrs += [
            _attr("gen_ai.usage.prompt_tokens", int(rec["prompt_tokens"])),
            _attr("gen_ai.usage.completion_tokens", int(rec["completion_tokens"])),
            _attr("gen_ai.usage.cached_tokens", int(rec["cached_tokens"])),
            _attr("gen_ai.request.id", rid),
            _attr("gen_ai.latency.e2e", float(rec["e2e_latency"])),
        ]
    return {
        "traceId": trace,
        "spanId": _hex(cfg, 16, "span", r.request_id, role, rid),
        "parentSpanId": parent,
        "name": f"{role} Req {rid[:8]}",
        "kind": INTERNAL,
        "startTimeUnixNano": str((ts - e2e_us) * 1000),
        "endTimeUnixNano": str(ts * 1000),
        "attributes": attrs,
        "status": {},
    }


def _resource_spans(service: str, scope: str, spans: list[dict[str, object]], sdk: bool) -> dict[str, object]:
    attrs = [_attr("service.name", service)]
    if sdk:  # the Python SDK's Resource.create defaults
        attrs += [_attr("telemetry.sdk.language", "python"), _attr("telemetry.sdk.name", "opentelemetry"),
                  _attr("telemetry.sdk.version", "1.38.0")]  # fmt: skip
    return {"resource": {"attributes": attrs}, "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}


def render_otlp(cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> Rendered:
    by_room = engine_records(nodes)
    out = []
    for r in _by_end(reqs):
        rs = [_resource_spans("envoy-ai-gateway", "envoy-ai-gateway", [_gateway_span(cfg, r)], False)]
        for node, role, ts, rec in by_room.get(r.room, []):
            rs.append(_resource_spans(node, "sglang server", [_sglang_span(cfg, r, role, ts, rec)], True))
        out.append(json.dumps({"resourceSpans": rs}, ensure_ascii=False, separators=(",", ":")) + "\n")
    ids: list[tuple[str, ...]] = [("spec_request_id", "format_request_id", "trace_id")]
    ids += sorted((r.request_id, *otlp_ids(cfg, r)[::-1]) for r in reqs)
    return Rendered({OTLP_FILE: "".join(out).encode()}, ids)


def render(cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> Rendered:
    """The gateway files (and id map) of cfg.gateway_format (any but kvf)."""
    fmt = cfg.gateway_format
    if fmt == "litellm_spendlogs":
        return render_spendlogs(cfg, reqs)
    if fmt == "litellm_payload":
        return render_payload(cfg, reqs)
    if fmt == "smg":
        return render_smg(cfg, reqs)
    if fmt == "envoy":
        return render_envoy(cfg, reqs)
    if fmt == "otlp":
        return render_otlp(cfg, reqs, nodes)
    raise ValueError(f"no writer for gateway format {fmt!r}")


def write_ids(root: Path, ids: list[tuple[str, ...]] | None) -> None:
    """truth/gateway_ids.csv beside the bundle (root is OUT/bundle); removed when the ids are the spec's."""
    path = root.parent / "truth" / IDS_FILE
    if ids is None:
        path.unlink(missing_ok=True)
    else:
        write_bytes(path, _csv_bytes(ids))


def write_gateway_format(root: Path, cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> None:
    out = render(cfg, reqs, nodes)
    for name, data in out.files.items():
        write_bytes(root / "gateway" / name, data)
    write_ids(root, out.ids)

"""LiteLLM's logs of the simulated requests: the LiteLLM_SpendLogs table as a Postgres CSV export, and
the StandardLoggingPayload JSON lines of its custom loggers (docs/gateway-formats.md, sources at each
function)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from forensics.simulate.config import SimConfig
from forensics.simulate.gateway_logs._common import (
    API_BASE,
    ROUTE,
    Rendered,
    by_end,
    digest,
    log_ts,
    succeeded,
    text_of,
    uuid4_of,
)
from forensics.simulate.request import Request

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
    return r.rid_d if succeeded(r) else uuid4_of(cfg, "litellm_call_id", r.request_id)


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
    p, c = (r.L, r.completion) if succeeded(r) else (0, 0)
    return {"completion_tokens": c, "prompt_tokens": p, "total_tokens": p + c}


def _failure_prompt_tokens(cfg: SimConfig, r: Request) -> int:
    """The prompt tokens a failure's LiteLLM_SpendLogs row carries. Since BerriAI/litellm#37365 (merged
    2026-08-18, "record estimated input tokens in spend logs for failed dispatched requests") the proxy
    counts a failed request's messages itself (litellm/proxy/spend_tracking/input_tokens.py
    count_input_tokens_for_model: litellm.token_counter), with tiktoken for a model it does not know
    (litellm/utils.py _select_tokenizer_helper), not the engine's tokenizer and chat template: an estimate
    near the engine's input length, not equal to it. The simulator stands it in by that length off by up
    to 10%, drawn from the request's id (the traffic's RNG is untouched). Before that release the column
    was 0 (a failure has no usage). The StandardLoggingPayload of a failure still has 0
    (get_standard_logging_object_payload with init_response_obj={}: _usage)."""
    off = int.from_bytes(digest(cfg, "litellm_token_estimate", r.request_id)[:2], "big") / 65535 * 0.2 - 0.1
    return max(1, round(r.L * (1 + off)))


def _error_information(r: Request) -> dict[str, str]:
    if succeeded(r):
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


def _messages(r: Request) -> list[dict[str, str]]:
    """The request's messages as LiteLLM logs them; without simulated texts, as turn_off_message_logging
    leaves them."""
    t = text_of(r)
    if t is None:
        return [{"role": "user", "content": "redacted-by-litellm"}]
    return [{"role": "system", "content": t.system}, {"role": "user", "content": t.user}]


def _response_text(r: Request) -> str:
    t = text_of(r)
    return "redacted-by-litellm" if t is None else t.response


def _spend_response(cfg: SimConfig, r: Request) -> dict[str, Any]:
    """The response column: json.dumps of the payload's response (a ModelResponse; {} for a failure)."""
    if not succeeded(r):
        return {}
    usage = _usage(r)
    return {"id": r.rid_d, "created": r.t_end // 1_000_000, "model": cfg.model_path, "object": "chat.completion",
            "choices": [{"finish_reason": "stop", "index": 0,
                         "message": {"content": _response_text(r), "role": "assistant"}}], "usage": usage}  # fmt: skip


def _spendlogs_row(cfg: SimConfig, r: Request) -> list[object]:
    """One LiteLLM_SpendLogs row as get_logging_payload (litellm/proxy/spend_tracking/
    spend_tracking_utils.py) makes it: metadata is SpendLogsMetadata (litellm/proxy/_types.py), which holds
    no user agent; the agent reaches the row only through request_tags."""
    ok = succeeded(r)
    usage = _usage(r)
    # a failure's row: its id is the litellm_call_id (litellm_id), its startTime the request's start (since
    # litellm/proxy/spend_tracking/failure_payload_enricher.py resolve_failure_start_time; before it, the
    # failure hook's now(), as endTime: BerriAI/litellm#24888), its prompt tokens LiteLLM's estimate
    row_prompt = usage["prompt_tokens"] if ok else _failure_prompt_tokens(cfg, r)
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
        row_prompt + usage["completion_tokens"],
        row_prompt,
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
        _jsonb(_messages(r)) if text_of(r) else "{}",
        _jsonb(_spend_response(cfg, r)) if text_of(r) else "{}",
        uuid4_of(cfg, "litellm_trace_id", r.request_id),  # session_id: the payload's trace_id
        "success" if ok else "failure",
        None,
        None,
        "{}",
    ]


def render_spendlogs(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    lines = [",".join(SPENDLOGS_COLUMNS)]
    for r in by_end(reqs):
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
    ok = succeeded(r)
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
        "trace_id": uuid4_of(cfg, "litellm_trace_id", r.request_id),
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
    data = "".join(json.dumps(_payload(cfg, r)) + "\n" for r in by_end(reqs))
    return Rendered({"litellm_payload.jsonl": data.encode()}, _litellm_ids(cfg, reqs))

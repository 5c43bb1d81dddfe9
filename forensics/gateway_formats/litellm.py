"""LiteLLM proxy: what its two log shapes share, and the StandardLoggingPayload JSON lines its custom
loggers write (s3, gcs_bucket, generic_api callbacks). The LiteLLM_SpendLogs table is
forensics.gateway_formats.litellm_spendlogs.

The join key LiteLLM leaves: the upstream response id (SGLang's decode rid) of a success; a failure has
no response, so LiteLLM records its own litellm_call_id (a UUID that names no engine record). A client
that went away (spec status 499) is a failure with error_code "499"; LiteLLM logs no tokens for a
failure. truth/gateway_ids.csv maps each spec request_id to the id LiteLLM logs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from forensics.gateway_formats._mapping import Format, Mapping, paths_of
from forensics.gateway_formats._writing import (
    ROUTE,
    EngineRecords,
    Rendered,
    SimRequest,
    SimSettings,
    by_end,
    succeeded,
    text_of,
    uuid4_of,
)

TENANT = ("team", "organization", "user", "key_alias", "end_user")
STATUS = (("success", "200"), ("failure", ""))

PAYLOAD = Mapping(
    # StandardLoggingPayload (litellm/types/utils.py; built by litellm_logging.py
    # get_standard_logging_object_payload): id is the response id, times are float epoch seconds.
    name="litellm_payload",
    doc="LiteLLM StandardLoggingPayload JSON lines (s3, gcs_bucket, generic_api callbacks)",
    detect=("id", "call_type", "startTime", "metadata"),
    fields={
        "ts": paths_of("startTime"),
        "request_id": paths_of("id"),
        "api_token_id": paths_of("metadata.user_api_key_hash"),
        "client_ip": paths_of("requester_ip_address", "metadata.requester_ip_address"),
        "user_agent": paths_of("user_agent", "metadata.user_agent"),
        "model": paths_of("model_group", "model"),
        "status": paths_of("status"),
        "prompt_tokens": paths_of("prompt_tokens"),
        "completion_tokens": paths_of("completion_tokens"),
        "trace_id": (),
        "engine_id": (),
        # the request's messages (list of {role, content}, content a string or a list of parts) and
        # the ModelResponse (choices[].message.content); "redacted-by-litellm" with
        # turn_off_message_logging
        "prompt_text": paths_of("messages"),
        "response_text": paths_of("response"),
    },
    attrs={
        "team": paths_of("metadata.user_api_key_team_id"),
        "team_alias": paths_of("metadata.user_api_key_team_alias"),
        "organization": paths_of("metadata.user_api_key_org_id"),
        "key_alias": paths_of("metadata.user_api_key_alias"),
        "user": paths_of("metadata.user_api_key_user_id"),
        "end_user": paths_of("end_user", "metadata.user_api_key_end_user_id"),
        "tags": paths_of("request_tags"),
    },
    tenant=TENANT,
    time="epoch_s",
    status_map=STATUS,
    status_fallback=paths_of("error_information.error_code"),
    duration_from=(("startTime",), ("endTime",)),
    duration_unit=1000.0,
    headers_at=paths_of("metadata.requester_custom_headers"),
    # get_standard_logging_metadata (litellm_logging.py) starts from a StandardLoggingMetadata with every
    # key None and fills what it knows: the tenant keys are in every payload's metadata, null or not
    always=paths_of(
        "metadata.user_api_key_team_id",
        "metadata.user_api_key_org_id",
        "metadata.user_api_key_user_id",
        "metadata.user_api_key_alias",
        "metadata.user_api_key_end_user_id",
    ),
)

# --- the simulator's writers: what both shapes share ----------------------------------------------------
API_BASE = "http://smg-router.inference.svc.cluster.local:30000/v1"  # LiteLLM's upstream: the SGLang router

# error_information of a failure (StandardLoggingPayloadErrorInformation, litellm/types/utils.py; filled by
# litellm_logging.py get_error_information from the exception's status_code; a client disconnect is
# _CLIENT_DISCONNECTED_ERROR_INFORMATION, error_code "499", in newer proxies)
_ERRORS = {
    400: ("BadRequestError", "litellm.BadRequestError: OpenAIException - The input is longer than the context length."),
    499: ("ClientDisconnected", "Client disconnected the request"),
    503: ("ServiceUnavailableError", "litellm.ServiceUnavailableError: OpenAIException - Service Unavailable"),
}  # fmt: skip


def litellm_id(cfg: SimSettings, r: SimRequest) -> str:
    """The id LiteLLM logs: the response's `id` (SGLang's decode rid) else its litellm_call_id
    (litellm_logging.py: `response_obj.get("id", kwargs.get("litellm_call_id"))`; spend_tracking_utils.py
    get_spend_logs_id)."""
    return r.rid_d if succeeded(r) else uuid4_of(cfg, "litellm_call_id", r.request_id)


def api_key_hash(r: SimRequest) -> str:
    """hash_token: sha256 hex of the virtual key (here: of the spec's token id)."""
    return hashlib.sha256(r.token.encode()).hexdigest()


def model_id(cfg: SimSettings) -> str:
    return hashlib.sha256(json.dumps({"model": f"openai/{cfg.model_path}", "api_base": API_BASE}).encode()).hexdigest()


def ua_tags(ua: str) -> list[str]:
    """request_tags LiteLLM adds from the user agent (litellm_logging.py _get_user_agent_tags)."""
    tags = ["User-Agent: " + ua.split("/")[0]] if "/" in ua else []
    return [*tags, "User-Agent: " + ua]


def usage(r: SimRequest) -> dict[str, int]:
    """A failure has no response and so no usage: LiteLLM logs zero tokens for it."""
    p, c = (r.L, r.completion) if succeeded(r) else (0, 0)
    return {"completion_tokens": c, "prompt_tokens": p, "total_tokens": p + c}


def error_information(r: SimRequest) -> dict[str, str]:
    if succeeded(r):
        return {"error_code": "", "error_class": "", "llm_provider": "", "traceback": "", "error_message": ""}
    cls, msg = _ERRORS.get(r.status, ("APIError", f"litellm.APIError: OpenAIException - Error code: {r.status}"))
    if r.status == 499:
        return {"error_code": str(r.status), "error_message": msg, "error_class": cls}
    return {"error_code": str(r.status), "error_class": cls, "llm_provider": "openai", "traceback": "",
            "error_message": msg}  # fmt: skip


def messages(r: SimRequest) -> list[dict[str, str]]:
    """The request's messages as LiteLLM logs them; without simulated texts, as turn_off_message_logging
    leaves them."""
    t = text_of(r)
    if t is None:
        return [{"role": "user", "content": "redacted-by-litellm"}]
    return [{"role": "system", "content": t.system}, {"role": "user", "content": t.user}]


def response_text(r: SimRequest) -> str:
    t = text_of(r)
    return "redacted-by-litellm" if t is None else t.response


def litellm_ids(cfg: SimSettings, reqs: Sequence[SimRequest]) -> list[tuple[str, ...]]:
    rows = sorted((r.request_id, litellm_id(cfg, r)) for r in reqs)
    return [("spec_request_id", "format_request_id"), *rows]


# --- StandardLoggingPayload -------------------------------------------------------------------------------
def _payload(cfg: SimSettings, r: SimRequest) -> dict[str, Any]:
    """One StandardLoggingPayload (litellm/types/utils.py) in the key order of
    get_standard_logging_object_payload (litellm/litellm_core_utils/litellm_logging.py); metadata as
    get_standard_logging_metadata initialises it (StandardLoggingMetadata), requester_custom_headers as the
    enterprise hook fills it (the client's x- headers)."""
    ok = succeeded(r)
    status = "success" if ok else "failure"
    use = usage(r)
    start, end = r.t0 / 1e6, r.t_end / 1e6
    metadata: dict[str, Any] = {
        "user_api_key_hash": api_key_hash(r),
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
        "usage_object": use,
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
                    "message": {"content": response_text(r), "role": "assistant", "tool_calls": None},
                }
            ],
            "usage": use,
        }
    err = error_information(r)
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
        "total_tokens": use["total_tokens"],
        "prompt_tokens": use["prompt_tokens"],
        "completion_tokens": use["completion_tokens"],
        "request_tags": ua_tags(r.ua),
        "end_user": "",
        "api_base": API_BASE,
        "model_group": cfg.model,
        "model_id": model_id(cfg),
        "requester_ip_address": r.ip,
        "user_agent": r.ua,
        "messages": messages(r),
        "response": response,
        "model_parameters": {},
        "hidden_params": {
            "model_id": model_id(cfg),
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


def render_payload(cfg: SimSettings, reqs: Sequence[SimRequest], engine: EngineRecords) -> Rendered:
    """JSON lines as the s3/gcs_bucket/generic_api loggers write them: json.dumps (safe_dumps) of each
    payload, default separators, non-ASCII escaped."""
    data = "".join(json.dumps(_payload(cfg, r)) + "\n" for r in by_end(reqs))
    return Rendered({"litellm_payload.jsonl": data.encode()}, litellm_ids(cfg, reqs))


FORMAT = Format(PAYLOAD, render_payload)

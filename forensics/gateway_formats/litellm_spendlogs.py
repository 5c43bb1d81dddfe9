"""LiteLLM proxy's LiteLLM_SpendLogs table (a CSV, JSON or Parquet export of it), and the simulator's
writer of it as a Postgres CSV export. What it shares with the StandardLoggingPayload (the tenant order,
the status words, the id LiteLLM logs) is forensics.gateway_formats.litellm."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from forensics.gateway_formats._mapping import Format, Mapping, paths_of
from forensics.gateway_formats._writing import (
    EngineRecords,
    Rendered,
    SimRequest,
    SimSettings,
    by_end,
    digest,
    log_ts,
    succeeded,
    text_of,
    uuid4_of,
)
from forensics.gateway_formats.litellm import (
    API_BASE,
    STATUS,
    TENANT,
    api_key_hash,
    error_information,
    litellm_id,
    litellm_ids,
    messages,
    model_id,
    response_text,
    ua_tags,
    usage,
)

SPENDLOGS = Mapping(
    # LiteLLM_SpendLogs (BerriAI/litellm schema.prisma; rows written by
    # litellm/proxy/spend_tracking/spend_tracking_utils.py get_logging_payload): request_id is the
    # upstream response id; startTime is UTC (_ensure_datetime_utc), so a CSV of the Postgres
    # timestamp(3) column, which carries no zone, is read as UTC.
    name="litellm_spendlogs",
    doc="LiteLLM proxy LiteLLM_SpendLogs rows (CSV/JSON/Parquet export)",
    detect=("request_id", "call_type", "api_key", "startTime"),
    fields={
        "ts": paths_of("startTime"),
        "request_id": paths_of("request_id"),
        "api_token_id": paths_of("api_key", "metadata.user_api_key"),
        "client_ip": paths_of("requester_ip_address", "metadata.requester_ip_address"),
        "user_agent": paths_of("proxy_server_request.headers.user-agent"),  # stored prompts only; else tags
        "model": paths_of("model_group", "model"),
        "status": paths_of("status", "metadata.status"),
        "prompt_tokens": paths_of("prompt_tokens"),
        "completion_tokens": paths_of("completion_tokens"),
        "duration_ms": paths_of("request_duration_ms"),
        "trace_id": (),
        "engine_id": (),
        # with store_prompts_in_spend_logs only (else "{}"): get_logging_payload writes messages and
        # response as json.dumps of the payload's; newer proxies leave messages "{}" and keep the
        # request body (its messages) in proxy_server_request, a column and a metadata key
        "prompt_text": paths_of("messages", "proxy_server_request.messages", "metadata.proxy_server_request.messages"),
        "response_text": paths_of("response"),
    },
    attrs={
        "team": paths_of("team_id", "metadata.user_api_key_team_id"),
        "team_alias": paths_of("metadata.user_api_key_team_alias"),
        "organization": paths_of("organization_id", "metadata.user_api_key_org_id"),
        "key_alias": paths_of("metadata.user_api_key_alias"),
        "user": paths_of("user", "metadata.user_api_key_user_id"),
        "end_user": paths_of("end_user"),
        "tags": paths_of("request_tags"),
    },
    tenant=TENANT,
    zone="UTC",
    # LiteLLM adds "User-Agent: <product>" and "User-Agent: <full UA>" to request_tags unless
    # litellm.disable_add_user_agent_to_request_tags (SpendLogs has no user agent column)
    ua_from_tags=True,
    status_map=STATUS,
    status_fallback=paths_of("metadata.error_information.error_code", "metadata.status_code"),
    duration_from=(("startTime",), ("endTime",)),
    # columns of LiteLLM_SpendLogs since its baseline migration: an export of the table has them in every
    # row, null when unset
    always=paths_of("team_id", "user"),
)

# --- the simulator's writer -----------------------------------------------------------------------------
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


def jsonb(v: Any) -> str:
    """A value as Postgres prints jsonb: object keys shortest first, then bytewise; ", " and ": "
    between items; strings with only ", \\ and control characters escaped (escape_json)."""
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {jsonb(x)}" for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(jsonb(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def pg_csv(v: object) -> str:
    """One field as psql `\\copy ... CSV` writes it: NULL unquoted empty, an empty string "", a value
    with the delimiter, a quote, CR or LF quoted with quotes doubled (copyto.c CopyAttributeOutCSV)."""
    if v is None:
        return ""
    s = v if isinstance(v, str) else str(v)
    if s == "" or any(c in s for c in ',"\r\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def pg_ts(us: int) -> str:
    """A timestamp(3) without time zone as Postgres prints it: rounded to ms, trailing zeros dropped."""
    ms_total = (us + 500) // 1000
    base = log_ts(ms_total * 1000, False)
    frac = f"{ms_total % 1000:03d}".rstrip("0")
    return f"{base}.{frac}" if frac else base


def _spend_response(cfg: SimSettings, r: SimRequest) -> dict[str, Any]:
    """The response column: json.dumps of the payload's response (a ModelResponse; {} for a failure)."""
    if not succeeded(r):
        return {}
    use = usage(r)
    return {"id": r.rid_d, "created": r.t_end // 1_000_000, "model": cfg.model_path, "object": "chat.completion",
            "choices": [{"finish_reason": "stop", "index": 0,
                         "message": {"content": response_text(r), "role": "assistant"}}], "usage": use}  # fmt: skip


def _failure_prompt_tokens(cfg: SimSettings, r: SimRequest) -> int:
    """The prompt tokens a failure's LiteLLM_SpendLogs row carries. Since BerriAI/litellm#37365 (merged
    2026-08-18, "record estimated input tokens in spend logs for failed dispatched requests") the proxy
    counts a failed request's messages itself (litellm/proxy/spend_tracking/input_tokens.py
    count_input_tokens_for_model: litellm.token_counter), with tiktoken for a model it does not know
    (litellm/utils.py _select_tokenizer_helper), not the engine's tokenizer and chat template: an estimate
    near the engine's input length, not equal to it. The simulator stands it in by that length off by up
    to 10%, drawn from the request's id (the traffic's RNG is untouched). Before that release the column
    was 0 (a failure has no usage). The StandardLoggingPayload of a failure still has 0
    (get_standard_logging_object_payload with init_response_obj={}: litellm.usage)."""
    off = int.from_bytes(digest(cfg, "litellm_token_estimate", r.request_id)[:2], "big") / 65535 * 0.2 - 0.1
    return max(1, round(r.L * (1 + off)))


def _spendlogs_row(cfg: SimSettings, r: SimRequest) -> list[object]:
    """One LiteLLM_SpendLogs row as get_logging_payload (litellm/proxy/spend_tracking/
    spend_tracking_utils.py) makes it: metadata is SpendLogsMetadata (litellm/proxy/_types.py), which holds
    no user agent; the agent reaches the row only through request_tags."""
    ok = succeeded(r)
    use = usage(r)
    # a failure's row: its id is the litellm_call_id (litellm_id), its startTime the request's start (since
    # litellm/proxy/spend_tracking/failure_payload_enricher.py resolve_failure_start_time; before it, the
    # failure hook's now(), as endTime: BerriAI/litellm#24888), its prompt tokens LiteLLM's estimate
    row_prompt = use["prompt_tokens"] if ok else _failure_prompt_tokens(cfg, r)
    metadata: dict[str, Any] = {
        "user_api_key": api_key_hash(r),
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
        "usage_object": use,
        "model_map_information": {"model_map_key": cfg.model_path, "model_map_value": None},
        "cold_storage_object_key": None,
        "litellm_overhead_time_ms": None,
        "cost_breakdown": None,
        "additional_usage_values": {},
        "status": "success" if ok else "failure",
    }
    if not ok:
        metadata["error_information"] = error_information(r)
    return [
        litellm_id(cfg, r),
        "acompletion",
        api_key_hash(r),
        0,  # spend: a self-hosted model has no price in LiteLLM's cost map
        row_prompt + use["completion_tokens"],
        row_prompt,
        use["completion_tokens"],
        pg_ts(r.t0),
        pg_ts(r.t_end),
        round((r.t_end - r.t0) / 1000),
        pg_ts(r.t_end),  # completionStartTime: the end time unless streamed (completion_start_time default)
        cfg.model_path,
        model_id(cfg),
        cfg.model,
        "openai",
        API_BASE,
        "",  # user: user_api_key_user_id or ""
        jsonb(metadata),
        "False",
        "Cache OFF",
        jsonb(ua_tags(r.ua)),
        r.account,
        "",  # organization_id: user_api_key_org_id or ""
        "",  # end_user
        r.ip,
        # messages, response, proxy_server_request: only with store_prompts_in_spend_logs (with texts:
        # json.dumps of the payload's messages and response, stored as jsonb)
        jsonb(messages(r)) if text_of(r) else "{}",
        jsonb(_spend_response(cfg, r)) if text_of(r) else "{}",
        uuid4_of(cfg, "litellm_trace_id", r.request_id),  # session_id: the payload's trace_id
        "success" if ok else "failure",
        None,
        None,
        "{}",
    ]


def render_spendlogs(cfg: SimSettings, reqs: Sequence[SimRequest], engine: EngineRecords) -> Rendered:
    lines = [",".join(SPENDLOGS_COLUMNS)]
    for r in by_end(reqs):
        lines.append(",".join(pg_csv(v) for v in _spendlogs_row(cfg, r)))
    return Rendered({"spend_logs.csv": ("\n".join(lines) + "\n").encode()}, litellm_ids(cfg, reqs))


FORMAT = Format(SPENDLOGS, render_spendlogs)

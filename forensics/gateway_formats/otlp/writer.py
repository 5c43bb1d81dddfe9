"""The simulator's writer of OTLP/JSON traces (forensics.gateway_formats.otlp reads them).

The OpenTelemetry file exporter's layout (opentelemetry.io/docs/specs/otel/protocol/file-exporter/;
opentelemetry-proto examples/trace.json): a TracesData object per line, lowerCamelCase, hex ids, times
and int64 values as decimal strings, SpanKind as a number. The gateway's SERVER span (HTTP and GenAI
semantic-convention attributes, the tenant as tenant.id from x-tenant-id); the SGLang root spans as
python/sglang/srt/observability/trace.py TraceReqContext.trace_req_start makes them ("{role} Req
{rid[:8]}", rid, module, bootstrap_room = str(hex(room)), parented on the incoming traceparent) with the
SpanAttributes set at finish (old gen_ai.usage.prompt_tokens/completion_tokens names).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from forensics.gateway_formats._writing import (
    ROUTE,
    EngineRecords,
    Rendered,
    SimRequest,
    SimSettings,
    by_end,
    hex_of,
    succeeded,
    text_of,
)

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


def otlp_ids(cfg: SimSettings, r: SimRequest) -> tuple[str, str]:
    """(trace id, the gateway span's id)."""
    return hex_of(cfg, 32, "trace", r.request_id), hex_of(cfg, 16, "span", r.request_id)


def _gateway_span(cfg: SimSettings, r: SimRequest) -> dict[str, object]:
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
    if succeeded(r):
        attrs += [_attr("gen_ai.usage.input_tokens", r.L), _attr("gen_ai.usage.output_tokens", r.completion)]
    t = text_of(r)
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


def _sglang_span(cfg: SimSettings, r: SimRequest, role: str, ts: int, rec: dict[str, Any]) -> dict[str, object]:
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
        "spanId": hex_of(cfg, 16, "span", r.request_id, role, rid),
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


def render_otlp(cfg: SimSettings, reqs: Sequence[SimRequest], engine: EngineRecords) -> Rendered:
    out = []
    for r in by_end(reqs):
        rs = [_resource_spans("envoy-ai-gateway", "envoy-ai-gateway", [_gateway_span(cfg, r)], False)]
        for node, role, ts, rec in engine.get(r.room, []):
            rs.append(_resource_spans(node, "sglang server", [_sglang_span(cfg, r, role, ts, rec)], True))
        out.append(json.dumps({"resourceSpans": rs}, ensure_ascii=False, separators=(",", ":")) + "\n")
    ids: list[tuple[str, ...]] = [("spec_request_id", "format_request_id", "trace_id")]
    ids += sorted((r.request_id, *otlp_ids(cfg, r)[::-1]) for r in reqs)
    return Rendered({OTLP_FILE: "".join(out).encode()}, ids)

"""OpenTelemetry OTLP/JSON traces (the file exporter: one TracesData object per line,
https://opentelemetry.io/docs/specs/otel/protocol/file-exporter/; field names as opentelemetry-proto
examples/trace.json: lowerCamelCase, ids in hex, times as decimal strings), their reader and the
simulator's writer of them.

The reader (read_spans, the Mapping's reader) flattens each span (its attributes and its resource's into
objects of plain values) and sorts it:
- an SGLang root span (attributes `rid` and `bootstrap_room`, the room as `str(hex(room))`:
  python/sglang/srt/observability/trace.py) goes to engine_spans: trace id -> rid and room, which the
  gateway join uses;
- a vLLM `llm_request` span names a request id only: kept out, counted;
- a client request is a root SERVER or CLIENT span (no parent) that is neither: it becomes a gateway
  record, numbered by its place among the file's spans.
The join key: the trace id, which the SGLang root spans share. A client that went away (spec status 499)
leaves a gateway span without status code. truth/gateway_ids.csv maps each spec request_id to the
gateway span's id (the fallback request id of a span without one) and the trace id.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from typing import Any

from forensics.gateway_formats._mapping import FileRecords, Format, Mapping, paths_of
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

HEADER = "http.request.header."
REQUEST_KINDS = (2, 3)  # SpanKind (opentelemetry-proto trace.proto): 1 INTERNAL, 2 SERVER, 3 CLIENT


def any_value(v: Any) -> Any:
    """An OTLP AnyValue as a plain value (intValue is a decimal string in JSON; arrays of one value
    give the value, as header attributes are string arrays)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        values = [any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
        return values[0] if len(values) == 1 else values
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(items: Any) -> dict[str, Any]:
    return {a["key"]: any_value(a.get("value")) for a in items or [] if isinstance(a, dict) and "key" in a}


def hex_id(v: Any, width: int) -> str | None:
    """A trace or span id as lowercase hex; some backends write base64 (told apart by its length)."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) == width:
        return v.lower()
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return v.lower()
    return raw.hex() if len(raw) * 2 == width else v.lower()


def room_of(v: Any) -> int | None:
    """SGLang writes the room as str(hex(room)); a number or decimal text is taken too."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return int(v, 16) if v.lower().startswith("0x") else int(v)
        except ValueError:
            return None
    return None


def read_spans(lines: Iterable[bytes], file_id: int) -> FileRecords:
    """A file's client-request spans as records (numbered by their place among the file's spans), its
    SGLang spans as engine_spans rows; a line that is no TracesData object is a record of its own, rejected."""
    rows: list[int] = []
    errors: list[str | None] = []
    recs: list[str | None] = []
    engine: list[tuple] = []
    spans_seen = other = 0
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("resourceSpans"), list):
                raise ValueError("no resourceSpans array")
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            spans_seen += 1
            rows.append(spans_seen)
            errors.append(f"line {lineno}: not an OTLP/JSON traces object: {str(err)[:80]}")
            recs.append(None)
            continue
        for rs in data["resourceSpans"]:
            resource = attributes(((rs or {}).get("resource") or {}).get("attributes"))
            for ss in (rs or {}).get("scopeSpans") or []:
                for span in (ss or {}).get("spans") or []:
                    spans_seen += 1
                    kind = _classify(span, resource, lineno, file_id, engine)
                    if kind is None:
                        other += 1
                        continue
                    rows.append(spans_seen)
                    errors.append(None)
                    recs.append(json.dumps(kind))
    # spans that are no client request (engine spans, child spans): read and kept out of the gateway
    note = f"{spans_seen} spans: {len(rows)} client requests, {len(engine)} SGLang request spans, {other} others"
    return FileRecords(rows, errors, recs, engine, other, note)


def _classify(span: Any, resource: dict[str, Any], lineno: int, file_id: int, engine: list[tuple]) -> dict | None:
    """The flattened record of a client-request span, else None (an SGLang span is noted in `engine`)."""
    if not isinstance(span, dict):
        return None
    attrs = attributes(span.get("attributes"))
    trace = hex_id(span.get("traceId"), 32)
    if "rid" in attrs and "bootstrap_room" in attrs:
        name = str(span.get("name") or "")
        role = name.split(" ", 1)[0].lower() if name else None
        engine.append(
            (trace, str(attrs["rid"]), room_of(attrs["bootstrap_room"]), role, resource.get("service.name"),
             file_id, lineno)
        )  # fmt: skip
        return None
    # a gateway's span of the request: SERVER where it serves the client, CLIENT where it calls upstream
    # (Envoy AI Gateway's "chat <model>" span); vLLM's llm_request is the engine's own
    if span.get("parentSpanId") or span.get("kind") not in REQUEST_KINDS or span.get("name") == "llm_request":
        return None
    start, end = _nanos(span.get("startTimeUnixNano")), _nanos(span.get("endTimeUnixNano"))
    return {
        "trace_id": trace,
        "span_id": hex_id(span.get("spanId"), 16),
        "name": span.get("name"),
        "start_ns": str(start) if start is not None else span.get("startTimeUnixNano"),
        "duration_ns": end - start if start is not None and end is not None else None,
        "status_code": (span.get("status") or {}).get("code"),
        "attributes": attrs,
        # request headers the gateway recorded (semconv http.request.header.<name>, a string array)
        "headers": {k[len(HEADER) :]: v for k, v in attrs.items() if k.startswith(HEADER) and isinstance(v, str)},
        "resource": resource,
        "content": _content(attrs, span.get("events")),
        "line": lineno,
    }


# gen_ai content as the semantic conventions' versions in use carry it, prompt side then response side:
# v1.37+ (and semantic-conventions-genai) opt-in attributes gen_ai.system_instructions, gen_ai.input.messages,
# gen_ai.output.messages (JSON: messages of role and parts, a text part {"type": "text", "content": ...}),
# also on the event gen_ai.client.inference.operation.details; v1.28 to v1.36 events gen_ai.system.message,
# gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message (content) and gen_ai.choice
# (message.content); v1.26/1.27 events gen_ai.content.prompt (gen_ai.prompt) and gen_ai.content.completion
# (gen_ai.completion); OpenLLMetry's flattened gen_ai.prompt.<i>.content and gen_ai.completion.<i>.content.
PROMPT_ATTRS = ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.prompt")
RESPONSE_ATTRS = ("gen_ai.output.messages", "gen_ai.completion")
PROMPT_EVENTS = ("gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message")


def _indexed(attrs: dict[str, Any], prefix: str) -> list[Any]:
    """OpenLLMetry's <prefix>.<i>.content values in index order."""
    found = []
    for k, v in attrs.items():
        if k.startswith(prefix) and k.endswith(".content"):
            i = k[len(prefix) : -len(".content")]
            if i.isdigit():
                found.append((int(i), v))
    return [v for _, v in sorted(found)]


def _content(attrs: dict[str, Any], events: Any) -> dict[str, list[Any]]:
    """The span's prompt and response content (as logged: text or message JSON), for
    forensics.ingest.content to fingerprint; the text goes no further than the staged record."""
    prompt = [attrs[k] for k in PROMPT_ATTRS if k in attrs] + _indexed(attrs, "gen_ai.prompt.")
    response = [attrs[k] for k in RESPONSE_ATTRS if k in attrs] + _indexed(attrs, "gen_ai.completion.")
    for ev in events if isinstance(events, list) else []:
        if not isinstance(ev, dict):
            continue
        name, ea = ev.get("name"), attributes(ev.get("attributes"))
        if name == "gen_ai.client.inference.operation.details":
            prompt += [ea[k] for k in PROMPT_ATTRS if k in ea]
            response += [ea[k] for k in RESPONSE_ATTRS if k in ea]
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in ea:
            prompt.append(ea["gen_ai.prompt"])
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in ea:
            response.append(ea["gen_ai.completion"])
        elif name in PROMPT_EVENTS:
            prompt.append(ea.get("content"))
        elif name == "gen_ai.choice":
            response.append(ea.get("message", ea.get("content")))
    return {"prompt": [p for p in prompt if p is not None], "response": [r for r in response if r is not None]}


def _nanos(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


# --- the simulator's writer -----------------------------------------------------------------------------
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


OTLP = Mapping(
    # OTLP/JSON traces (opentelemetry.io file exporter; opentelemetry-proto examples/trace.json),
    # flattened by read_spans into one record per client-request span.
    name="otlp",
    doc="OpenTelemetry OTLP/JSON trace lines (resourceSpans)",
    detect=("resourceSpans",),
    fields={
        "ts": paths_of("start_ns"),
        "request_id": paths_of("attributes|http.request.header.x-request-id", "span_id"),
        "client_ip": paths_of("attributes|client.address"),
        "user_agent": paths_of("attributes|user_agent.original"),
        "model": paths_of("attributes|gen_ai.request.model", "attributes|gen_ai.response.model"),
        "status": paths_of("attributes|http.response.status_code"),
        "prompt_tokens": paths_of("attributes|gen_ai.usage.input_tokens", "attributes|gen_ai.usage.prompt_tokens"),
        "completion_tokens": paths_of(
            "attributes|gen_ai.usage.output_tokens", "attributes|gen_ai.usage.completion_tokens"
        ),
        "duration_ms": paths_of("duration_ns"),
        "trace_id": paths_of("trace_id"),
        "engine_id": paths_of("attributes|http.request.header.x-request-id", "attributes|gen_ai.response.id"),
        # gathered by the reader from the gen_ai content attributes and events (_content)
        "prompt_text": paths_of("content.prompt"),
        "response_text": paths_of("content.response"),
    },
    attrs={
        "user": paths_of("attributes|user.id", "resource|user.id"),
        "end_user": paths_of("attributes|enduser.id"),
    },
    tenant=("attributes|tenant.id", "resource|tenant.id", "end_user", "user"),
    time="epoch_ns",
    duration_unit=1e-6,
    headers_at=paths_of("headers"),
    reader=read_spans,
)

FORMAT = Format(OTLP, render_otlp)
